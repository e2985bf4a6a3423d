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

Retries wait an exponential backoff with random jitter (so a burst of 429s
does not come back in lockstep), or the server's ``Retry-After`` when it sends
one.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import aiohttp

from pacore_graph.errors import ModelCallError
from pacore_graph.graph.records import Completion
from pacore_graph.graph.seeds import sample_seed
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.choice_stream import ChoiceStream, stream_error
from pacore_graph.llm.reply_checks import (
    indexed_choices,
    malformed,
    object_field,
    optional_list,
    text_field,
    token_count,
    usage_of,
)
from pacore_graph.llm.reply_limits import (
    read_capped,
    read_error_head,
    reply_cap,
    sse_lines,
    too_large,
)
from pacore_graph.llm.sampling import (
    NSampler,
    PerSampleClient,
    SampleOutcome,
    check_encodable,
    first_failure,
    with_seed,
)
from pacore_graph.settings.config import RetryPolicy, SamplingParams

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

#: Environment variables read for the API key, in order.
API_KEY_ENV_VARS = ("PACORE_API_KEY", "OPENAI_API_KEY")

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: The server as a whole is busy: smaller requests would not help.
_OVERLOADED_STATUS = frozenset({429, 503})


def http_error(url: str, status: int, raw: bytes, retry_after: str | None) -> ModelCallError:
    """The error for a non-200 answer: status, the body's head, whether and when to retry."""
    detail = " ".join(raw[:300].decode("utf-8", "replace").split()) or "(empty body)"
    return ModelCallError(
        f"HTTP {status} from {url}: {detail}",
        status=status,
        kind="status",
        retryable=retryable_status(status),
        retry_after=parse_retry_after(retry_after),
        server_wide=status in _OVERLOADED_STATUS,
    )


@contextlib.contextmanager
def transport_errors(url: str, timeout: float, doing: str) -> Iterator[None]:
    r"""Timeouts and connection failures as retryable :class:`ModelCallError`\ s naming ``url``.

    A refused connection is ``server_wide`` (the replica is down, not this
    request), which is what the multi-endpoint client routes around.
    """
    try:
        yield
    except TimeoutError:
        raise ModelCallError(
            f"timed out after {round(timeout, 2):g}s {doing} {url}",
            retryable=True,
            kind="timeout",
        ) from None
    except aiohttp.ClientError as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ModelCallError(
            f"cannot reach {url}: {type(exc).__name__}: {detail}",
            retryable=True,
            server_wide=isinstance(exc, aiohttp.ClientConnectorError),
            kind="transport",
        ) from None


def retryable_status(status: int) -> bool:
    """Whether an HTTP error status is one retries are for (429, 5xx, a few 4xx)."""
    return status in _RETRYABLE_STATUS or status >= 500


@runtime_checkable
class ChatClient(Protocol):
    """What an explorer needs from a model: ``n`` samples of one conversation.

    Raises :class:`~pacore_graph.errors.ModelCallError` when the call fails for
    good; returns exactly ``n`` completions otherwise.

    A client may also offer ``complete_each`` (same arguments, one
    ``Completion`` or ``ModelCallError`` per sample, never raising for a
    failed sample): the batcher then fails only the explorers whose samples
    failed, not all K of the request. Both shipped clients do.
    """

    model: str

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]: ...


@runtime_checkable
class SampleStreamingClient(Protocol):
    """A client that can stream one ``n``-sample request, each sample as it finishes.

    ``stream_each`` yields ``(index, outcome)`` for every sample ``0..n-1``
    exactly once, in the order they finish; closing the iterator (or
    cancelling the task reading it) abandons the request, and the server
    stops generating the samples nobody waits for any more. Straggler
    control uses it to keep a round one ``n=K`` request.
    """

    model: str

    def stream_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        params: SamplingParams,
        seed: int | None = None,
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]: ...


#: Called with ("content" | "reasoning", text) for each streamed delta.
DeltaCallback = Callable[[str, str], Awaitable[None]]


def resolve_api_key(explicit: str | None = None) -> str:
    """The API key: the argument, else ``PACORE_API_KEY``, else ``OPENAI_API_KEY``.

    Local servers (vLLM, llama.cpp) accept any key, so the fallback is a
    placeholder rather than an error.
    """
    if explicit:
        return explicit
    for name in API_KEY_ENV_VARS:
        value = os.environ.get(name)
        if value:
            return value
    return "EMPTY"


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split ``total`` over ``weights`` proportionally, as integers summing to ``total``.

    Servers report usage for a whole ``n``-sample request; each sample's share
    is estimated by its text length (largest-remainder rounding keeps the sum,
    and so effective TTC, exact). Every sample cost at least one token (its
    finish token, if nothing else), so when the total allows it each share is
    at least 1: a short answer beside a long one is never counted as free.
    """
    if not weights:
        return []
    if total >= len(weights):
        rest = _proportional(total - len(weights), weights)
        return [1 + r for r in rest]
    return _proportional(total, weights)


def _proportional(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder; even when all are 0)."""
    wsum = sum(weights)
    if wsum <= 0:
        base, extra = divmod(total, len(weights))
        return [base + (1 if i < extra else 0) for i in range(len(weights))]
    raw = [total * w / wsum for w in weights]
    shares = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - shares[i], reverse=True)
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _choice_token_count(choice: Mapping[str, Any], where: str) -> int | None:
    """Exact completion tokens of one choice when the server says (logprobs, token ids)."""
    token_ids = optional_list(choice, "token_ids", where)
    if token_ids is not None:
        return len(token_ids)
    logprobs = object_field(choice, "logprobs", where)
    entries = optional_list(logprobs, "content", f"{where}.logprobs")
    return len(entries) if entries is not None else None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def _no_content(finish: str | None, reasoning: str | None) -> ModelCallError:
    why = f"finish_reason={finish!r}"
    if reasoning:
        why += f", {len(reasoning)} characters of reasoning and no answer"
    return ModelCallError(f"server returned no content (content: null, {why})", kind="no_content")


def _answer_error(data: Mapping[str, Any]) -> ModelCallError:
    """A 200 answer without choices: the server's own error object, on one line."""
    error = data.get("error")
    detail = error.get("message") if isinstance(error, Mapping) else error
    text = json.dumps(detail if detail is not None else data, default=str)[:300]
    return malformed(f"no choices in the answer: {text}")


def parse_chat_choices(
    data: Mapping[str, Any], *, latency_s: float, model: str | None = None, n: int | None = None
) -> list[SampleOutcome]:
    """One outcome per choice of a chat.completion JSON object.

    A choice whose ``content`` is null (and that made no tool call) is a
    failed sample with its cause, not an empty success: a reasoning model cut
    by ``max_tokens`` while still thinking answers like that. An answer of
    the wrong shape (see :mod:`pacore_graph.llm.reply_checks`; ``n`` is how many
    samples were asked for, and more choices than that are refused) raises
    one ``ModelCallError(kind="malformed")``.
    """
    raw_choices = data.get("choices")
    if raw_choices is None or raw_choices == []:
        raise _answer_error(data)
    choices = indexed_choices(raw_choices, n)
    usage = usage_of(data)
    prompt_tokens = token_count(usage, "prompt_tokens")
    total_completion = token_count(usage, "completion_tokens", samples=len(choices))
    answer_model = data.get("model")
    if not isinstance(answer_model, str) or not answer_model:
        answer_model = model
    parsed: list[tuple[Mapping[str, Any], str | None, str | None, str | None, list[Any] | None]]
    parsed = []
    for index, choice in choices:
        where = f"choice {index}"
        message = object_field(choice, "message", where)
        content = text_field(message, "content", f"{where}.message")
        reasoning = text_field(message, "reasoning", f"{where}.message")
        if reasoning is None:
            reasoning = text_field(message, "reasoning_content", f"{where}.message")
        tool_calls = optional_list(message, "tool_calls", f"{where}.message")
        finish = text_field(choice, "finish_reason", where)
        if content is None and not tool_calls:
            parsed.append((choice, None, reasoning, finish, None))
            continue
        parsed.append((choice, content or "", reasoning, finish, tool_calls))
    exact = [_choice_token_count(c, f"choice {i}") for i, c in choices]
    if len(choices) == 1:
        shares, estimated = [total_completion], False
    elif all(e is not None for e in exact):
        shares, estimated = [int(e or 0) for e in exact], False
    else:
        weights = [len(c or "") + len(r or "") for _, c, r, _, _ in parsed]
        shares, estimated = apportion(total_completion, weights), True
    out: list[SampleOutcome] = []
    for (choice, content, reasoning, finish, _), share in zip(parsed, shares, strict=True):
        if content is None:
            out.append(_no_content(finish, reasoning))
            continue
        token_ids = choice.get("token_ids")
        logprobs = choice.get("logprobs")
        out.append(
            Completion(
                content=content,
                reasoning=reasoning,
                finish_reason=finish,
                prompt_tokens=prompt_tokens,
                completion_tokens=share,
                latency_s=latency_s,
                tokens_estimated=estimated,
                logprobs=logprobs if isinstance(logprobs, Mapping) else None,
                token_ids=tuple(token_ids) if isinstance(token_ids, list) else None,
                model=answer_model,
            )
        )
    return out


def parse_chat_response(
    data: Mapping[str, Any], *, latency_s: float, model: str | None = None
) -> list[Completion]:
    """Turn a chat.completion JSON object into one :class:`Completion` per choice.

    Raises :class:`ModelCallError` when a choice failed (see :func:`parse_chat_choices`).
    """
    return first_failure(parse_chat_choices(data, latency_s=latency_s, model=model))


class _OptionRefused(ModelCallError):
    """A 400 to a request that asked for ``continuous_usage_stats`` (vLLM's, not OpenAI's)."""


class OpenAICompatClient(PerSampleClient):
    """Direct OpenAI-compatible chat-completions client over pooled aiohttp.

    One ``ClientSession`` per event loop (sessions cannot cross loops), created
    on first use and closed by :meth:`aclose`. The API key goes only into the
    ``Authorization`` header; it is never logged or put into errors.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        connection_limit: int = 0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("model must name the served model (e.g. the vLLM --model value)")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.retry = retry or RetryPolicy()
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {
            "Authorization": f"Bearer {resolve_api_key(api_key)}",
            "Content-Type": "application/json",
            **(headers or {}),
        }
        self._connection_limit = connection_limit
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
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            **params.request_fields(),
        }
        check_encodable(body["messages"])
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
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            **params.request_fields(),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        check_encodable(body["messages"])
        if seed is not None:
            body["seed"] = seed
        policy = self.retry
        if deadline is None:
            deadline = CallDeadline.start(policy.call_seconds(params.timeout))
        for attempt in range(1, policy.max_attempts + 1):
            if not deadline.allows():
                raise deadline.expire()
            sent = [False]
            try:
                return await self._stream_once(
                    body, deadline.attempt_timeout(params.timeout), on_delta, sent
                )
            except ModelCallError as exc:
                exc.attempts = attempt
                if sent[0] or not exc.retryable or attempt == policy.max_attempts:
                    raise
                delay = policy.delay(attempt, retry_after=exc.retry_after, rng=self._rng)
                if not deadline.allows(delay):
                    raise deadline.expire(exc) from None
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

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
        payload_bytes = _encode(body)
        cap = reply_cap(body, request_bytes=len(payload_bytes), streamed=True)
        line_cap = reply_cap(body, request_bytes=len(payload_bytes))  # a whole answer
        kept = 0
        with transport_errors(self._url, timeout, "streaming from"):
            async with self._session().post(
                self._url, data=payload_bytes, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                if resp.status != 200:
                    raw = await read_error_head(resp)
                    raise http_error(self._url, resp.status, raw, resp.headers.get("Retry-After"))
                async for line in sse_lines(resp, cap, self._url, line_cap=line_cap):
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        break
                    try:
                        event = json.loads(payload)
                    except ValueError:
                        raise ModelCallError(
                            f"server sent an invalid stream event: {payload[:200]!r}",
                            kind="malformed",
                        ) from None
                    if not isinstance(event, dict):
                        raise malformed(f"a stream event is {payload[:60]!r}, not an object")
                    if "error" in event or event.get("object") == "error":
                        raise stream_error(event)
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
            why = f"finish_reason={finish!r}"
            if reasoning:
                why += f", {sum(map(len, reasoning))} characters of reasoning and no answer"
            raise ModelCallError(
                f"server returned no content (streamed none, {why})", kind="no_content"
            )
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
            model=self.model,
        )

    async def stream_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        params: SamplingParams,
        seed: int | None = None,
        deadline: CallDeadline | None = None,
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
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            **params.request_fields(),
            "stream": True,
        }
        check_encodable(body["messages"])
        if n > 1:
            body["n"] = n
        if seed is not None:
            body["seed"] = seed
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
            stream = ChoiceStream(n, model=self.model, keep_cap=self._keep_cap(body))
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
            except ModelCallError as exc:
                if probing and exc.status in (400, 422):
                    self._continuous_usage = True  # a bad request either way, not the option
                exc.attempts = attempt
                delay = 0.0
                if exc.retryable and not reported and attempt < policy.max_attempts:
                    delay = policy.delay(attempt, retry_after=exc.retry_after, rng=self._rng)
                    if not deadline.allows(delay):
                        deadline.expire(exc)
                if reported or not exc.retryable or attempt >= policy.max_attempts:
                    if exc.retryable and not reported and attempt > 1:
                        exc.args = (f"{exc.args[0]} (gave up after {attempt} attempts)",)
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
        cut = ModelCallError(
            "the stream ended before this sample finished"
            + ("" if stream.done else " (no [DONE]: the connection was cut)"),
            retryable=True,
            kind="transport",
        )
        for index in missing:
            yield index, cut

    @staticmethod
    def _keep_cap(body: Mapping[str, Any]) -> int:
        """What a stream's kept text may add up to: a whole JSON answer's cap."""
        return reply_cap(body, request_bytes=len(_encode(body)))

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
        payload = _encode(body)
        cap = reply_cap(body, request_bytes=len(payload), streamed=True)
        line_cap = reply_cap(body, request_bytes=len(payload))  # one event: a whole answer
        with transport_errors(self._url, timeout, "streaming from"):
            async with self._session().post(
                self._url, data=payload, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                if resp.status != 200:
                    raw = await read_error_head(resp)
                    if resp.status in (400, 422) and self._continuous_usage:
                        # Maybe a server that refuses vLLM's option: ask once more
                        # without it (a bad request fails again, then for good).
                        self._continuous_usage = False
                        detail = raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
                        raise _OptionRefused(detail, status=resp.status)
                    raise http_error(self._url, resp.status, raw, resp.headers.get("Retry-After"))
                complete = False
                try:
                    async for line in sse_lines(resp, cap, self._url, line_cap=line_cap):
                        if not line.startswith(b"data:"):
                            continue
                        latency = time.perf_counter() - started
                        for item in stream.feed(line[5:].strip(), latency_s=latency):
                            yield item
                        if stream.done:
                            break
                    complete = True
                finally:
                    if not complete:
                        resp.close()  # drop the connection: the server cancels the rest

    async def _singles(
        self,
        body: Mapping[str, Any],
        timeout: float,
        seed: int | None,
        indices: list[int],
        deadline: CallDeadline,
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]:
        """Samples ``indices`` one JSON request each (seed + j), reported as each returns."""
        one = {k: v for k, v in body.items() if k not in ("n", "stream", "stream_options")}

        async def fetch(j: int) -> tuple[int, SampleOutcome]:
            request = dict(one)
            sample = sample_seed(seed, j)
            if sample is not None:
                request["seed"] = sample
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
        policy = self.retry
        for attempt in range(1, policy.max_attempts + 1):
            if not deadline.allows():
                raise deadline.expire()
            try:
                return await self._post(body, deadline.attempt_timeout(timeout))
            except ModelCallError as exc:
                exc.attempts = attempt
                if not exc.retryable or attempt == policy.max_attempts:
                    if exc.retryable:
                        exc.args = (f"{exc.args[0]} (gave up after {attempt} attempts)",)
                    raise
                delay = policy.delay(attempt, retry_after=exc.retry_after, rng=self._rng)
                if not deadline.allows(delay):
                    raise deadline.expire(exc) from None
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _post(self, body: Mapping[str, Any], timeout: float) -> list[SampleOutcome]:
        started = time.perf_counter()
        payload = _encode(body)
        cap = reply_cap(body, request_bytes=len(payload))
        with transport_errors(self._url, timeout, "waiting for"):
            async with self._session().post(
                self._url, data=payload, timeout=aiohttp.ClientTimeout(total=timeout)
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
            raise ModelCallError(
                f"server sent invalid JSON: {raw[:200].decode('utf-8', 'replace')!r}",
                kind="malformed",
            ) from None
        finally:
            del raw  # the bytes are parsed or dropped, not kept for as long as the call lives
        if not isinstance(data, dict):
            raise malformed(f"the answer is {type(data).__name__} JSON, not an object")
        n = body.get("n")
        return parse_chat_choices(
            data, latency_s=latency, model=self.model, n=n if isinstance(n, int) else 1
        )


def _encode(body: Mapping[str, Any]) -> bytes:
    """A request body as sent: encoded once, so the reply cap can count its size."""
    return json.dumps(body).encode("utf-8")
