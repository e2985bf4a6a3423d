"""The LangChain chat client: ``ChatOpenAI`` for OpenAI-compatible servers, and the adapter
that lets any LangChain chat model drive the explorers.

:func:`make_chat_model` builds a ``ChatOpenAI`` for vLLM (or any
OpenAI-compatible server) the way this project needs it:

- the openai SDK's aiohttp transport (``openai.DefaultAioHttpClient``), which
  measured 1.4x faster than its default httpx transport here;
- retries with backoff on 429, 5xx and connection errors (the SDK's own);
- the API key from ``PACORE_API_KEY`` / ``OPENAI_API_KEY``;
- the server's reasoning kept. ``langchain-openai`` (checked on 1.7.3) drops
  vLLM's ``reasoning`` / ``reasoning_content`` fields; :class:`ReasoningChatOpenAI`
  puts them into ``additional_kwargs["reasoning_content"]``, in whole answers and in
  streamed deltas alike.

:class:`LangChainChatClient` lets any LangChain chat model drive the explorers.
Its :meth:`~LangChainChatClient.stream` makes it a
:class:`~pacore_graph.graph.streaming.StreamingChatClient`, as the direct client
is: the final answer's tokens reach a graph streamed with
``stream_mode="messages"`` (through the explorer's ``TokenStream``, under the
answer's message id), not only the finished answer.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, convert_to_messages
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

from pacore_graph.errors import (
    MalformedReplyError,
    ModelCallError,
    NoContentError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    UpstreamTransportError,
)
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.chat_reply import apportion, no_content
from pacore_graph.llm.credentials import resolve_api_key
from pacore_graph.llm.protocols import DeltaCallback
from pacore_graph.llm.reply_checks import indexed_choices, malformed, token_count
from pacore_graph.llm.reply_limits import reply_cap, too_large
from pacore_graph.llm.sampling import (
    NSampler,
    PerSampleClient,
    SampleOutcome,
    check_encodable,
    with_seed,
)
from pacore_graph.llm.transport import retryable_status
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["LangChainChatClient", "ReasoningChatOpenAI", "aclose_chat_model", "make_chat_model"]

REASONING_FIELDS = ("reasoning", "reasoning_content")
#: Set in ``generation_info``: the choice's index as the server sent it (checked against n).
INDEX_KEY = "pacore_index"
#: Set in ``additional_kwargs`` when the server sent ``content: null`` without tool calls.
NO_CONTENT_KEY = "pacore_no_content"


def _raw_choices(response: Any) -> list[tuple[int, Mapping[str, Any]]]:
    """The answer's ``(index, choice)`` pairs in index order, checked (``reply_checks``)."""
    if isinstance(response, Mapping):
        choices = response.get("choices") or []
    else:
        dumped = response.model_dump(warnings=False) if hasattr(response, "model_dump") else {}
        choices = dumped.get("choices") or []
    return indexed_choices(choices, None)


class ReasoningChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` that keeps the server's reasoning field (vLLM's ``reasoning``)."""

    def _create_chat_result(
        self,
        response: dict[str, Any] | openai.BaseModel,
        generation_info: dict[str, Any] | None = None,
    ) -> ChatResult:
        choices = _raw_choices(response)  # a malformed answer fails before LangChain reads it
        result = super()._create_chat_result(response, generation_info)
        for gen, (index, choice) in zip(result.generations, choices, strict=False):
            gen.generation_info = {**(gen.generation_info or {}), INDEX_KEY: index}
            message = choice.get("message") or {}
            if message.get("content") is None and not message.get("tool_calls"):
                gen.message.additional_kwargs[NO_CONTENT_KEY] = choice.get("finish_reason")
            for key in REASONING_FIELDS:
                if message.get(key):
                    gen.message.additional_kwargs["reasoning_content"] = message[key]
                    break
        return result

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        """A streamed delta, its reasoning kept (LangChain drops it there too)."""
        gen = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        choices = chunk.get("choices") or []
        delta = choices[0].get("delta") if choices and isinstance(choices[0], Mapping) else None
        if gen is not None and isinstance(delta, Mapping):
            for key in REASONING_FIELDS:
                if isinstance(delta.get(key), str) and delta[key]:
                    gen.message.additional_kwargs["reasoning_content"] = delta[key]
                    break
        return gen


class _ReplyTooLarge(Exception):
    """Raised inside the SDK's read of a body over its cap; carries the call's error."""

    def __init__(self, error: ModelCallError) -> None:
        super().__init__(str(error))
        self.error = error


#: The SDK reads an error body whole to build its exception: this much at most.
SDK_ERROR_BODY_CAP = 64 << 10


async def _cap_reply(response: Any) -> None:
    """An httpx response hook: the body is read under :func:`reply_cap` (bounded reads).

    The hook runs before the SDK reads the body, so the body's stream is
    wrapped to fail once the running count passes the cap (a declared
    ``Content-Length`` over it fails at once). The SDK then sees an
    exception from its transport (it may retry, each attempt cut the same
    way); :meth:`LangChainChatClient._generate` reports it as
    ``response_too_large``.
    """
    request = response.request
    url = str(request.url)
    if response.status_code != 200:
        cap = SDK_ERROR_BODY_CAP
    else:
        content = request.content
        try:
            body = json.loads(content) if content else {}
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        cap = reply_cap(body, request_bytes=len(content), streamed=bool(body.get("stream")))
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise _ReplyTooLarge(too_large(url, cap))
    stream_type = sys.modules[type(response).__module__.split(".")[0]].AsyncByteStream
    inner = response.stream

    class _Capped(stream_type):  # type: ignore[misc,valid-type]
        async def __aiter__(self) -> AsyncIterator[bytes]:
            size = 0
            async for chunk in inner:
                size += len(chunk)
                if size > cap:
                    raise _ReplyTooLarge(too_large(url, cap))
                yield chunk

        async def aclose(self) -> None:
            await inner.aclose()

    response.stream = _Capped()


def _too_large_in(exc: BaseException) -> ModelCallError | None:
    """The cap's error when ``exc`` (or what it was raised from) is a capped read."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, _ReplyTooLarge):
            return seen.error
        seen = seen.__cause__ or seen.__context__
    return None


def _call_error(exc: BaseException) -> ModelCallError:
    """A LangChain/SDK failure as the branch of the error tree it belongs to.

    The SDK already retried; the branch decides whether a smaller request is
    worth trying (see :mod:`pacore_graph.llm.sampling`).
    """
    capped = _too_large_in(exc)
    if capped is not None:
        return capped
    text = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    if isinstance(exc, openai.APITimeoutError):
        return UpstreamTimeoutError(text, retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return UpstreamTransportError(text, retryable=True, server_wide=True)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return UpstreamStatusError(
            text,
            status=status,
            retryable=retryable_status(status),
            server_wide=status in (429, 503),
        )
    return MalformedReplyError(text)  # the SDK could not make sense of the answer


def make_chat_model(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    sampling: SamplingParams | None = None,
    retry: ModelRetryPolicy | None = None,
    aiohttp_transport: bool = True,
    **kwargs: Any,
) -> ReasoningChatOpenAI:
    """A LangChain chat model for an OpenAI-compatible server (vLLM first).

    ``base_url`` is the server's ``/v1`` URL, e.g. ``http://localhost:8000/v1``.
    """
    sampling = sampling or SamplingParams()
    retry = retry or ModelRetryPolicy()
    extra: dict[str, Any] = {}
    hooks = {"response": [_cap_reply]}
    if "http_async_client" in kwargs:
        pass  # the caller's own client, as given
    elif aiohttp_transport:
        extra["http_async_client"] = openai.DefaultAioHttpClient(event_hooks=hooks)
    else:
        extra["http_async_client"] = openai.DefaultAsyncHttpxClient(event_hooks=hooks)
    if sampling.max_tokens is not None:
        extra["max_tokens"] = sampling.max_tokens
    if sampling.extra_body:
        extra["extra_body"] = dict(sampling.extra_body)
    return ReasoningChatOpenAI(
        base_url=base_url,
        model=model,
        api_key=resolve_api_key(api_key),
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        timeout=sampling.timeout,
        max_retries=retry.max_attempts - 1,
        **extra,
        **kwargs,
    )


async def aclose_chat_model(chat_model: Any) -> None:
    """Close a ``ChatOpenAI``'s async HTTP client (its aiohttp pool warns if left open)."""
    root = getattr(chat_model, "root_async_client", None)
    if root is not None:
        await root.close()


class LangChainChatClient(PerSampleClient):
    """A :class:`~pacore_graph.llm.client.ChatClient` over any LangChain chat model.

    With a ``ChatOpenAI`` the ``n`` samples come from one request; other models
    (and servers that ignore ``n``) get one request per missing sample, each
    with its own seed (:mod:`pacore_graph.llm.sampling` decides, as for the direct
    client).
    """

    def __init__(self, chat_model: BaseChatModel, *, model: str | None = None) -> None:
        self.chat_model = chat_model
        self.model = model or str(
            getattr(chat_model, "model_name", None) or getattr(chat_model, "model", "langchain")
        )
        self._sampler = NSampler(supports_n=None if isinstance(chat_model, ChatOpenAI) else False)

    async def aclose(self) -> None:
        """Close the chat model's async HTTP client (``ChatOpenAI``'s connection pool)."""
        await aclose_chat_model(self.chat_model)

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]:
        """Like :meth:`complete`, but one outcome per sample: a failure stays that sample's."""
        kwargs: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p}
        if params.max_tokens is not None:
            kwargs["max_tokens"] = params.max_tokens
        if params.model is not None:
            kwargs["model"] = params.model  # a round's own model: the request's model name
        convo = list(messages)
        check_encodable(convo)
        # The SDK's timeout is per attempt and it retries on its own: the deadline
        # bounds the whole call, its retries and n-splits (pacore_graph.llm.call_deadline).
        attempts = getattr(self.chat_model, "max_retries", None)
        attempts = attempts + 1 if isinstance(attempts, int) and attempts >= 0 else 1
        deadline = CallDeadline.start(params.timeout * attempts)

        async def request(count: int, sample_seed: int | None) -> list[SampleOutcome]:
            call = dict(kwargs)
            if sample_seed is not None:
                call["seed"] = sample_seed
            if not deadline.allows():
                raise deadline.expire()
            try:
                async with asyncio.timeout(deadline.remaining()):
                    got = await self._generate(convo, count, call)
            except TimeoutError:
                raise deadline.expire() from None
            if len(got) > count:
                raise malformed(f"{len(got)} choices for n={count}")
            return with_seed(got, sample_seed)

        return await self._sampler.sample(request, n, seed)

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        params: SamplingParams,
        seed: int | None = None,
        on_delta: DeltaCallback,
    ) -> Completion:
        """One sample streamed, ``on_delta`` called as tokens arrive (as the direct client's).

        The chat model's own ``astream`` runs with no callbacks: the graph's
        token listener hears the deltas once, through ``on_delta`` (the
        explorer's :class:`~pacore_graph.graph.streaming.TokenStream`, under the
        answer's message id), never a second time from LangChain's own events.
        The SDK retries the request before anything streamed; the call's
        deadline bounds it all, as in :meth:`complete_each`.
        """
        kwargs: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p}
        if params.max_tokens is not None:
            kwargs["max_tokens"] = params.max_tokens
        if seed is not None:
            kwargs["seed"] = seed
        if isinstance(self.chat_model, ChatOpenAI):
            kwargs["stream_usage"] = True  # usage arrives in the last chunk
        convo = list(messages)
        check_encodable(convo)
        lc_messages = convert_to_messages([dict(m) for m in convo])
        attempts = getattr(self.chat_model, "max_retries", None)
        attempts = attempts + 1 if isinstance(attempts, int) and attempts >= 0 else 1
        deadline = CallDeadline.start(params.timeout * attempts)
        started = time.perf_counter()
        content: list[str] = []
        reasoning: list[str] = []
        finish: str | None = None
        usage: Mapping[str, Any] = {}
        try:
            async with asyncio.timeout(deadline.remaining()):
                stream = self.chat_model.astream(lc_messages, {"callbacks": []}, **kwargs)
                async for chunk in stream:
                    thought = chunk.additional_kwargs.get("reasoning_content")
                    if isinstance(thought, str) and thought:
                        reasoning.append(thought)
                        await on_delta("reasoning", thought)
                    text = chunk.text
                    if text:
                        content.append(text)
                        await on_delta("content", text)
                    finish = (chunk.response_metadata or {}).get("finish_reason") or finish
                    chunk_usage = getattr(chunk, "usage_metadata", None)
                    if chunk_usage:
                        usage = chunk_usage
        except TimeoutError:
            raise deadline.expire() from None
        except ModelCallError:
            raise
        except Exception as exc:
            error = _call_error(exc)
            raise error from (None if error is _too_large_in(exc) else exc)
        if not content:
            # The streamed form of ``content: null``: a failure with its cause, not "".
            raise no_content(finish, "".join(reasoning), streamed=True)
        # A model that sends no usage while streaming: one token per delta, an estimate.
        counted = usage.get("output_tokens") is not None
        return Completion(
            content="".join(content),
            reasoning="".join(reasoning) or None,
            finish_reason=finish,
            prompt_tokens=token_count(usage, "input_tokens"),
            completion_tokens=(
                token_count(usage, "output_tokens") if counted else len(content) + len(reasoning)
            ),
            latency_s=time.perf_counter() - started,
            tokens_estimated=not counted,
            model=self.model,
        )

    async def _generate(
        self, messages: list[Mapping[str, Any]], n: int, kwargs: dict[str, Any]
    ) -> list[SampleOutcome]:
        started = time.perf_counter()
        call_kwargs = dict(kwargs)
        if n > 1:
            call_kwargs["n"] = n
        # agenerate needs BaseMessage objects; the graph sends OpenAI-style dicts.
        lc_messages = convert_to_messages([dict(m) for m in messages])
        try:
            result = await self.chat_model.agenerate([lc_messages], **call_kwargs)
        except ModelCallError:
            raise
        except Exception as exc:
            error = _call_error(exc)
            raise error from (None if error is _too_large_in(exc) else exc)
        latency = time.perf_counter() - started
        generations = result.generations[0]
        for gen in generations:
            index = (gen.generation_info or {}).get(INDEX_KEY)
            if isinstance(index, int) and index >= n:
                raise malformed(f"a choice has index {index}, out of range (n={n})")
        usage = (result.llm_output or {}).get("token_usage") or {}
        texts: list[tuple[str, str | None, AIMessage | None]] = []
        for gen in generations:
            msg = getattr(gen, "message", None)
            ai = msg if isinstance(msg, AIMessage) else None
            content = ai.text if ai is not None else gen.text
            reasoning = ai.additional_kwargs.get("reasoning_content") if ai is not None else None
            texts.append((content, reasoning, ai))
        if not isinstance(usage, Mapping):
            raise malformed(f"usage is {type(usage).__name__}, not an object")
        total = token_count(usage, "completion_tokens", samples=max(1, len(texts)))
        first = texts[0][2] if texts else None
        if not total and first is not None and first.usage_metadata:
            # Models without llm_output usage: every message carries the request's usage.
            total = token_count(
                dict(first.usage_metadata), "output_tokens", samples=max(1, len(texts))
            )
        prompt_tokens = token_count(usage, "prompt_tokens")
        shares = (
            [total]
            if len(texts) == 1
            else apportion(total, [len(c) + len(r or "") for c, r, _ in texts])
        )
        out: list[SampleOutcome] = [
            Completion(
                content=content,
                reasoning=reasoning,
                finish_reason=(gen.generation_info or {}).get("finish_reason"),
                prompt_tokens=prompt_tokens,
                completion_tokens=share,
                latency_s=latency,
                tokens_estimated=len(texts) > 1,
                model=str(kwargs.get("model") or self.model),
            )
            for (content, reasoning, _), share, gen in zip(texts, shares, generations, strict=True)
        ]
        for i, (_, _, ai) in enumerate(texts):
            if ai is not None and NO_CONTENT_KEY in ai.additional_kwargs:
                finish = ai.additional_kwargs[NO_CONTENT_KEY]
                out[i] = NoContentError(
                    f"server returned no content (content: null, finish_reason={finish!r})"
                )
        return out
