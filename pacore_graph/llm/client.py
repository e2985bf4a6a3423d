"""Chat clients: how explorers reach a model.

:class:`ChatClient` is the one-method protocol explorers call. Two
implementations ship:

- :class:`OpenAICompatClient`: the direct path to any OpenAI-compatible server
  (vLLM, llama.cpp, SGLang, ...), one pooled aiohttp session per event loop.
  It is the default because the run's hot path is thousands of identical
  requests; measured here, LangChain's ``ChatOpenAI`` adds 2-5 ms of CPU per
  call on top of the HTTP (see ``benchmarks/README.md``).
- :class:`pacore_graph.llm.langchain_client.LangChainChatClient`: any LangChain chat
  model, e.g. the ``ChatOpenAI`` built by
  :func:`pacore_graph.llm.langchain_client.make_chat_model`.

Both keep the server's reasoning field (``reasoning`` or, from older vLLM,
``reasoning_content``), report per-sample finish reasons and usage, and accept
``n`` (several samples of one prompt in one request). What happens when a
server ignores ``n``, a batch request fails or a choice has no content is
decided once, in :mod:`pacore_graph.llm.sampling`.

:meth:`OpenAICompatClient.stream_each` streams one ``n``-sample request and
reports each sample the moment its choice finishes
(:class:`SampleStreamingClient`); straggler control uses it so that a round
stays one request while its stragglers can still be cut (closing it drops the
connection, and the server stops generating). The JSON request stays the
default everywhere else: it costs less per sample.

The client composes small modules, one concept each: the protocols
(:mod:`~pacore_graph.llm.protocols`), the HTTP status policy and SSE reading
(:mod:`~pacore_graph.llm.transport`), the retry rule with jittered backoff and
``Retry-After`` (:mod:`~pacore_graph.llm.retry`), the request body
(:mod:`~pacore_graph.llm.request_body`) and reading the answer
(:mod:`~pacore_graph.llm.chat_reply`). Their public names are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import aiohttp

from pacore_graph.errors import (
    MalformedReplyError,
    ModelCallError,
    UpstreamStatusError,
    UpstreamTransportError,
)
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.chat_reply import (
    apportion,
    no_content,
    parse_chat_choices,
    parse_chat_response,
)
from pacore_graph.llm.choice_stream import ChoiceStream, ChoiceWatch
from pacore_graph.llm.credentials import API_KEY_ENV_VARS, resolve_api_key
from pacore_graph.llm.protocols import ChatClient, DeltaCallback, SampleStreamingClient
from pacore_graph.llm.reply_checks import (
    indexed_choices,
    malformed,
    object_field,
    text_field,
    token_count,
    usage_of,
)
from pacore_graph.llm.reply_limits import read_capped, read_error_head, reply_cap, too_large
from pacore_graph.llm.request_body import chat_body, encode, single_sample
from pacore_graph.llm.retry import call_with_retry, next_attempt
from pacore_graph.llm.sampling import NSampler, PerSampleClient, SampleOutcome, with_seed
from pacore_graph.llm.session_header import DEFAULT_SESSION_HEADER, session_headers
from pacore_graph.llm.transport import (
    decode_event,
    http_error,
    parse_retry_after,
    retryable_status,
    sse_data,
    transport_errors,
)
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.values.records import Completion
from pacore_graph.values.seeds import sample_seed

__all__ = [
    "API_KEY_ENV_VARS",
    "ChatClient",
    "DeltaCallback",
    "OpenAICompatClient",
    "SampleStreamingClient",
    "apportion",
    "http_error",
    "parse_chat_choices",
    "parse_chat_response",
    "parse_retry_after",
    "resolve_api_key",
    "retryable_status",
    "transport_errors",
]


class _OptionRefused(UpstreamStatusError):
    """A 400 to a request that asked for ``continuous_usage_stats`` (vLLM's, not OpenAI's)."""


class _Events:
    """A streamed answer's SSE payloads, and the way to hang up on it."""

    __slots__ = ("_data", "_resp")

    def __init__(self, resp: aiohttp.ClientResponse, data: AsyncIterator[bytes]) -> None:
        self._resp = resp
        self._data = data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._data

    def hang_up(self) -> None:
        """Close the connection: the server stops decoding the rest."""
        self._resp.close()


class OpenAICompatClient(PerSampleClient):
    """Direct OpenAI-compatible chat-completions client over pooled aiohttp.

    One ``ClientSession`` per event loop (sessions cannot cross loops), created
    on first use and closed by :meth:`aclose`. The API key goes only into the
    ``Authorization`` header; it is never logged or put into errors.

    ``session_header`` names the header each request of a PaCoRe run carries
    its run id in (:mod:`pacore_graph.llm.session_header`; None: no such header).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        retry: ModelRetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        connection_limit: int = 0,
        session_header: str | None = DEFAULT_SESSION_HEADER,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("model must name the served model (e.g. the vLLM --model value)")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.retry = retry or ModelRetryPolicy()
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {
            "Authorization": f"Bearer {resolve_api_key(api_key)}",
            "Content-Type": "application/json",
            **(headers or {}),
        }
        self._connection_limit = connection_limit
        self.session_header = session_header
        self._sessions: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, aiohttp.ClientSession
        ] = weakref.WeakKeyDictionary()
        self._sampler = NSampler()
        self._rng = random.Random()
        self._continuous_usage = True

    @property
    def supports_n(self) -> bool | None:
        """False once the server is seen ignoring ``n`` (llama.cpp); None until known."""
        return self._sampler.supports_n

    def __repr__(self) -> str:
        return f"OpenAICompatClient(base_url={self.base_url!r}, model={self.model!r})"

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=self._connection_limit, ttl_dns_cache=300)
            session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, json_serialize=json.dumps
            )
            self._sessions[loop] = session
        return session

    async def aclose(self) -> None:
        """Close this loop's session (others close with their loops)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.pop(loop, None)
        if session is not None:
            await session.close()

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
        deadline: CallDeadline | None = None,
    ) -> list[SampleOutcome]:
        """Like :meth:`complete`, but one outcome per sample: a failure stays that sample's.

        ``deadline`` bounds the whole call, its retries and ``n``-splits
        included (:mod:`pacore_graph.llm.call_deadline`); by default one is
        started here from the retry policy.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        body = chat_body(self.model, messages, params)
        if deadline is None:
            deadline = CallDeadline.start(self.retry.call_seconds(params.timeout))
        call_deadline = deadline

        async def request(count: int, sample_seed: int | None) -> list[SampleOutcome]:
            one = dict(body)
            if count > 1:
                one["n"] = count
            if sample_seed is not None:
                one["seed"] = sample_seed
            got = await self._post_with_retry(one, params.timeout, call_deadline)
            return with_seed(got, sample_seed)

        return await self._sampler.sample(request, n, seed)

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        params: SamplingParams,
        seed: int | None = None,
        on_delta: DeltaCallback,
        deadline: CallDeadline | None = None,
    ) -> Completion:
        """One sample over server-sent events, ``on_delta`` called as tokens arrive.

        Retried like :meth:`complete` while nothing has been streamed yet; once
        a delta went out, a failure is final (the caller already showed it).
        """
        body = chat_body(self.model, messages, params, seed=seed, stream=True)
        body["stream_options"] = {"include_usage": True}
        policy = self.retry
        if deadline is None:
            deadline = CallDeadline.start(policy.call_seconds(params.timeout))
        sent = [False]

        async def attempt(timeout: float) -> Completion:
            return await self._stream_once(body, timeout, on_delta, sent)

        return await call_with_retry(
            attempt,
            timeout=params.timeout,
            policy=policy,
            deadline=deadline,
            rng=self._rng,
            may_retry=lambda: not sent[0],
            note_gave_up=False,
        )

    async def _stream_once(
        self,
        body: Mapping[str, Any],
        timeout: float,
        on_delta: DeltaCallback,
        sent: list[bool],
    ) -> Completion:
        started = time.perf_counter()
        content: list[str] = []
        reasoning: list[str] = []
        finish: str | None = None
        usage: Mapping[str, Any] = {}
        kept = 0
        async with self._open_stream(body, timeout) as (events, line_cap):
            async for payload in events:
                if payload == b"[DONE]":
                    break
                event = decode_event(payload)
                usage = usage_of(event) or usage
                for index, choice in indexed_choices(
                    event.get("choices") or [], 1, allow_repeats=True
                ):
                    where = f"choice {index}"
                    delta = object_field(choice, "delta", where)
                    think = text_field(delta, "reasoning", f"{where}.delta") or text_field(
                        delta, "reasoning_content", f"{where}.delta"
                    )
                    text = text_field(delta, "content", f"{where}.delta")
                    kept += (len(think) + 64 if think else 0) + (len(text) + 64 if text else 0)
                    if kept > line_cap:  # many small events, more than one answer holds
                        content.clear()
                        reasoning.clear()
                        raise too_large(self._url, line_cap, what="streamed answer")
                    if think:
                        reasoning.append(think)
                        sent[0] = True
                        await on_delta("reasoning", think)
                    if text:
                        content.append(text)
                        sent[0] = True
                        await on_delta("content", text)
                    finish = text_field(choice, "finish_reason", where) or finish
        if not content:
            # The streamed form of ``content: null``: a failure with its cause, not "".
            raise no_content(finish, "".join(reasoning), streamed=True)
        # Servers that ignore stream_options (llama.cpp) send no usage: count the
        # deltas instead (one token per event there), marked as an estimate.
        counted = usage.get("completion_tokens") is not None
        return Completion(
            content="".join(content),
            reasoning="".join(reasoning) if reasoning else None,
            finish_reason=finish,
            prompt_tokens=token_count(usage, "prompt_tokens"),
            completion_tokens=(
                token_count(usage, "completion_tokens")
                if counted
                else len(content) + len(reasoning)
            ),
            latency_s=time.perf_counter() - started,
            tokens_estimated=not counted,
            model=str(body.get("model") or self.model),
        )

    async def stream_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        params: SamplingParams,
        seed: int | None = None,
        deadline: CallDeadline | None = None,
        watch: ChoiceWatch | None = None,
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]:
        """One ``n``-sample request over SSE; ``(index, outcome)`` as each choice finishes.

        Every index ``0..n-1`` is reported once (a failed sample as its
        :class:`ModelCallError`); completions carry the request's ``seed``,
        so sample ``j`` stands for ``seed + j`` as in :meth:`complete_each`.
        The request is retried only while no sample has been reported; a
        failure after that fails the samples still running, not those
        already out. Closing the iterator (``aclose``, a ``break`` under
        ``contextlib.aclosing``, or cancelling the reading task) closes the
        HTTP response: the server sees the disconnect and stops generating.

        A server that ignores ``n`` (one choice back) gets the missing samples
        asked one per request, each with its own seed, as ``complete_each`` does.

        ``watch`` may stop a choice early from its streamed log-probabilities
        (see :mod:`~pacore_graph.llm.choice_stream`); once every choice is
        finished or stopped the response is closed. The one-per-request
        fallback is not watched.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        body = chat_body(self.model, messages, params, n=n, seed=seed, stream=True)
        policy = self.retry
        if deadline is None:
            deadline = CallDeadline.start(policy.call_seconds(params.timeout))
        missing: list[int] = list(range(n))
        if n > 1 and self._sampler.supports_n is False:
            async with contextlib.aclosing(
                self._singles(body, params.timeout, seed, missing, deadline)
            ) as it:
                async for item in it:
                    yield item
            return
        attempt = 0
        probing = False  # asking again without continuous usage after a 400
        while True:
            attempt += 1
            stream = ChoiceStream(
                n, model=str(body["model"]), keep_cap=self._keep_cap(body), watch=watch
            )
            reported = False
            try:
                if not deadline.allows():
                    raise deadline.expire()
                async with contextlib.aclosing(
                    self._stream_choices(body, deadline.attempt_timeout(params.timeout), stream)
                ) as choices:
                    async for index, outcome in choices:
                        reported = True
                        yield index, with_seed([outcome], seed)[0]
                break
            except _OptionRefused:
                attempt -= 1  # asked again at once without the option: not a retry
                probing = True
                continue
            except ModelCallError as caught:
                refused = isinstance(caught, UpstreamStatusError) and caught.status in (400, 422)
                if probing and refused:
                    self._continuous_usage = True  # a bad request either way, not the option
                exc, delay = next_attempt(
                    caught,
                    attempt,
                    policy,
                    deadline,
                    self._rng,
                    may_retry=not reported,
                    note_gave_up=attempt > 1,
                )
                if delay is None:
                    for index in stream.unfinished():
                        yield index, exc
                    return
            await asyncio.sleep(delay)
        missing = stream.unfinished()
        if not missing:
            if n > 1:
                self._sampler.supports_n = True
            return
        if stream.done and n > 1 and stream.seen <= {0}:
            self._sampler.supports_n = False  # the server ignored n: ask for the rest alone
            async with contextlib.aclosing(
                self._singles(body, params.timeout, seed, missing, deadline)
            ) as it:
                async for item in it:
                    yield item
            return
        cut = UpstreamTransportError(
            "the stream ended before this sample finished"
            + ("" if stream.done else " (no [DONE]: the connection was cut)"),
            retryable=True,
        )
        for index in missing:
            yield index, cut

    @staticmethod
    def _keep_cap(body: Mapping[str, Any]) -> int:
        """What a stream's kept text may add up to: a whole JSON answer's cap."""
        return reply_cap(body, request_bytes=len(encode(body)))

    def _stream_options(self) -> dict[str, bool]:
        """Usage on the last chunk, and each choice's running count on its chunks (vLLM).

        A server that answers a request asking for the running count with a
        400 is asked again without it, and never again (usage is then the
        last chunk's total, and a sample's count is estimated from its deltas).
        """
        options = {"include_usage": True}
        if self._continuous_usage:
            options["continuous_usage_stats"] = True
        return options

    async def _stream_choices(
        self, body: dict[str, Any], timeout: float, stream: ChoiceStream
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]:
        """One attempt: the choices of one streamed request as they finish."""
        started = time.perf_counter()
        body["stream_options"] = self._stream_options()

        def refused(status: int, raw: bytes) -> None:
            if status in (400, 422) and self._continuous_usage:
                # Maybe a server that refuses vLLM's option: ask once more
                # without it (a bad request fails again, then for good).
                self._continuous_usage = False
                detail = raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
                raise _OptionRefused(detail, status=status)

        async with self._open_stream(body, timeout, on_error=refused) as (events, _):
            complete = False
            try:
                async for payload in events:
                    latency = time.perf_counter() - started
                    for item in stream.feed(payload, latency_s=latency):
                        yield item
                    if stream.done or stream.abandoned:
                        break
                complete = not stream.abandoned  # a stopped choice: hang up on the rest
            finally:
                if not complete:
                    events.hang_up()  # drop the connection: the server cancels the rest

    @contextlib.asynccontextmanager
    async def _open_stream(
        self,
        body: Mapping[str, Any],
        timeout: float,
        *,
        on_error: Callable[[int, bytes], None] | None = None,
    ) -> AsyncIterator[tuple[_Events, int]]:
        """POST a streamed request; yield its SSE events and the cap on one whole answer.

        The one place a stream is opened: both caps derived from the request,
        a non-200 answer read to its capped head and raised as the status
        error (``on_error`` may raise its own first), transport failures
        turned into ``ModelCallError`` while the events are read.
        """
        payload = encode(body)
        cap = reply_cap(body, request_bytes=len(payload), streamed=True)
        line_cap = reply_cap(body, request_bytes=len(payload))  # one event: a whole answer
        with transport_errors(self._url, timeout, "streaming from"):
            async with self._session().post(
                self._url,
                data=payload,
                timeout=aiohttp.ClientTimeout(total=timeout),
                headers=session_headers(self.session_header),
            ) as resp:
                if resp.status != 200:
                    raw = await read_error_head(resp)
                    if on_error is not None:
                        on_error(resp.status, raw)
                    raise http_error(self._url, resp.status, raw, resp.headers.get("Retry-After"))
                yield _Events(resp, sse_data(resp, cap, self._url, line_cap=line_cap)), line_cap

    async def _singles(
        self,
        body: Mapping[str, Any],
        timeout: float,
        seed: int | None,
        indices: list[int],
        deadline: CallDeadline,
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]:
        """Samples ``indices`` one JSON request each (seed + j), reported as each returns."""

        async def fetch(j: int) -> tuple[int, SampleOutcome]:
            sample = sample_seed(seed, j)
            request = single_sample(body, sample if sample is not None else body.get("seed"))
            try:
                got = with_seed(await self._post_with_retry(request, timeout, deadline), sample)
            except ModelCallError as exc:
                return j, exc
            return j, got[0] if got else malformed("the answer had no choices")

        tasks = [asyncio.ensure_future(fetch(j)) for j in indices]
        try:
            for next_done in asyncio.as_completed(tasks):
                yield await next_done
        finally:
            for task in tasks:
                task.cancel()

    async def _post_with_retry(
        self, body: Mapping[str, Any], timeout: float, deadline: CallDeadline
    ) -> list[SampleOutcome]:

        async def attempt(attempt_timeout: float) -> list[SampleOutcome]:
            return await self._post(body, attempt_timeout)

        return await call_with_retry(
            attempt, timeout=timeout, policy=self.retry, deadline=deadline, rng=self._rng
        )

    async def _post(self, body: Mapping[str, Any], timeout: float) -> list[SampleOutcome]:
        started = time.perf_counter()
        payload = encode(body)
        cap = reply_cap(body, request_bytes=len(payload))
        with transport_errors(self._url, timeout, "waiting for"):
            async with self._session().post(
                self._url,
                data=payload,
                timeout=aiohttp.ClientTimeout(total=timeout),
                headers=session_headers(self.session_header),
            ) as resp:
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
                if status != 200:
                    raw = await read_error_head(resp)
                else:
                    raw = await read_capped(resp, cap, self._url)
        latency = time.perf_counter() - started
        if status != 200:
            raise http_error(self._url, status, raw, retry_after)
        try:
            data = json.loads(raw)
        except ValueError:
            raise MalformedReplyError(
                f"server sent invalid JSON: {raw[:200].decode('utf-8', 'replace')!r}"
            ) from None
        finally:
            del raw  # the bytes are parsed or dropped, not kept for as long as the call lives
        if not isinstance(data, dict):
            raise malformed(f"the answer is {type(data).__name__} JSON, not an object")
        n = body.get("n")
        asked = body.get("model")
        return parse_chat_choices(
            data,
            latency_s=latency,
            model=asked if isinstance(asked, str) else self.model,
            n=n if isinstance(n, int) else 1,
        )
