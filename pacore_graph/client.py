"""Chat clients: how explorers reach a model.

:class:`ChatClient` is the one-method protocol explorers call. Two
implementations ship:

- :class:`OpenAICompatClient`: the direct path to any OpenAI-compatible server
  (vLLM, llama.cpp, SGLang, ...), one pooled aiohttp session per event loop.
  It is the default because the run's hot path is thousands of identical
  requests; measured here, LangChain's ``ChatOpenAI`` adds 2-5 ms of CPU per
  call on top of the HTTP (see ``benchmarks/README.md``).
- :class:`pacore_graph.models.LangChainChatClient`: any LangChain chat model,
  e.g. the ``ChatOpenAI`` built by :func:`pacore_graph.models.make_chat_model`.

Both keep the server's reasoning field (``reasoning`` or, from older vLLM,
``reasoning_content``), report per-sample finish reasons and usage, and accept
``n`` (several samples of one prompt in one request). Servers that ignore
``n`` (llama.cpp) get the missing samples as separate requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import aiohttp

from pacore_graph.config import RetryPolicy, SamplingParams
from pacore_graph.errors import ModelCallError
from pacore_graph.records import Completion

__all__ = [
    "API_KEY_ENV_VARS",
    "ChatClient",
    "DeltaCallback",
    "OpenAICompatClient",
    "apportion",
    "parse_chat_response",
    "resolve_api_key",
]

#: Environment variables read for the API key, in order.
API_KEY_ENV_VARS = ("PACORE_API_KEY", "OPENAI_API_KEY")

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@runtime_checkable
class ChatClient(Protocol):
    """What an explorer needs from a model: ``n`` samples of one conversation.

    Raises :class:`~pacore_graph.errors.ModelCallError` when the call fails for
    good; returns exactly ``n`` completions otherwise.
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
    and so effective TTC, exact).
    """
    if not weights:
        return []
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


def _choice_token_count(choice: Mapping[str, Any]) -> int | None:
    """Exact completion tokens of one choice when the server says (logprobs, token ids)."""
    token_ids = choice.get("token_ids")
    if isinstance(token_ids, list):
        return len(token_ids)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, Mapping) and isinstance(logprobs.get("content"), list):
        return len(logprobs["content"])
    return None


def parse_chat_response(
    data: Mapping[str, Any], *, latency_s: float, model: str | None = None
) -> list[Completion]:
    """Turn a chat.completion JSON object into one :class:`Completion` per choice."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        raise ModelCallError(f"server answered without choices: {json.dumps(error or data)[:300]}")
    usage = data.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    total_completion = int(usage.get("completion_tokens") or 0)
    choices = sorted(choices, key=lambda c: c.get("index", 0))
    texts: list[tuple[str, str | None]] = []
    for choice in choices:
        message = choice.get("message") or {}
        content = message.get("content") or ""
        reasoning = message.get("reasoning")
        if reasoning is None:
            reasoning = message.get("reasoning_content")
        texts.append((content, reasoning))
    exact = [_choice_token_count(c) for c in choices]
    if len(choices) == 1:
        shares, estimated = [total_completion], False
    elif all(e is not None for e in exact):
        shares, estimated = [int(e or 0) for e in exact], False
    else:
        weights = [len(c) + len(r or "") for c, r in texts]
        shares, estimated = apportion(total_completion, weights), True
    out = []
    for choice, (content, reasoning), share in zip(choices, texts, shares, strict=True):
        token_ids = choice.get("token_ids")
        out.append(
            Completion(
                content=content,
                reasoning=reasoning,
                finish_reason=choice.get("finish_reason"),
                prompt_tokens=prompt_tokens,
                completion_tokens=share,
                latency_s=latency_s,
                tokens_estimated=estimated,
                logprobs=choice.get("logprobs"),
                token_ids=tuple(token_ids) if isinstance(token_ids, list) else None,
                model=data.get("model") or model,
            )
        )
    return out


class OpenAICompatClient:
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
        #: Becomes False once the server is seen ignoring ``n`` (llama.cpp).
        self.supports_n: bool | None = None

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

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            **params.request_fields(),
        }
        if seed is not None:
            body["seed"] = seed
        if n == 1 or self.supports_n is False:
            results = await asyncio.gather(
                *(self._post_with_retry(body, params.timeout) for _ in range(n))
            )
            return [c for group in results for c in group[:1]]
        body["n"] = n
        first = await self._post_with_retry(body, params.timeout)
        if len(first) >= n:
            self.supports_n = True
            return first[:n]
        # The server ignored n: fetch the rest one by one (and remember).
        self.supports_n = False
        del body["n"]
        rest = await asyncio.gather(
            *(self._post_with_retry(body, params.timeout) for _ in range(n - len(first)))
        )
        return first + [c for group in rest for c in group[:1]]

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        params: SamplingParams,
        seed: int | None = None,
        on_delta: DeltaCallback,
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
        if seed is not None:
            body["seed"] = seed
        policy = self.retry
        for attempt in range(1, policy.max_attempts + 1):
            sent = [False]
            try:
                return await self._stream_once(body, params.timeout, on_delta, sent)
            except ModelCallError as exc:
                exc.attempts = attempt
                if sent[0] or not exc.retryable or attempt == policy.max_attempts:
                    raise
            await asyncio.sleep(policy.backoff(attempt))
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
        try:
            async with self._session().post(
                self._url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                if resp.status != 200:
                    raw = await resp.read()
                    detail = raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
                    raise ModelCallError(
                        f"HTTP {resp.status} from {self._url}: {detail}",
                        status=resp.status,
                        retryable=resp.status in _RETRYABLE_STATUS or resp.status >= 500,
                    )
                async for raw_line in resp.content:
                    line = raw_line.strip()
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
                            retryable=not sent[0],
                        ) from None
                    usage = event.get("usage") or usage
                    for choice in event.get("choices") or ():
                        delta = choice.get("delta") or {}
                        think = delta.get("reasoning") or delta.get("reasoning_content")
                        if think:
                            reasoning.append(think)
                            sent[0] = True
                            await on_delta("reasoning", think)
                        if delta.get("content"):
                            content.append(delta["content"])
                            sent[0] = True
                            await on_delta("content", delta["content"])
                        finish = choice.get("finish_reason") or finish
        except TimeoutError:
            raise ModelCallError(
                f"timed out after {timeout:g}s streaming from {self._url}", retryable=True
            ) from None
        except aiohttp.ClientError as exc:
            raise ModelCallError(
                f"cannot reach {self._url}: {type(exc).__name__}: {exc}", retryable=True
            ) from None
        return Completion(
            content="".join(content),
            reasoning="".join(reasoning) if reasoning else None,
            finish_reason=finish,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=time.perf_counter() - started,
            model=self.model,
        )

    async def _post_with_retry(self, body: Mapping[str, Any], timeout: float) -> list[Completion]:
        policy = self.retry
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return await self._post(body, timeout)
            except ModelCallError as exc:
                exc.attempts = attempt
                if not exc.retryable or attempt == policy.max_attempts:
                    if exc.retryable:
                        exc.args = (f"{exc.args[0]} (gave up after {attempt} attempts)",)
                    raise
            await asyncio.sleep(policy.backoff(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _post(self, body: Mapping[str, Any], timeout: float) -> list[Completion]:
        started = time.perf_counter()
        try:
            async with self._session().post(
                self._url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except TimeoutError:
            raise ModelCallError(
                f"timed out after {timeout:g}s waiting for {self._url}", retryable=True
            ) from None
        except aiohttp.ClientError as exc:
            raise ModelCallError(
                f"cannot reach {self._url}: {type(exc).__name__}: {exc}", retryable=True
            ) from None
        latency = time.perf_counter() - started
        if status != 200:
            detail = raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
            raise ModelCallError(
                f"HTTP {status} from {self._url}: {detail}",
                status=status,
                retryable=status in _RETRYABLE_STATUS or status >= 500,
            )
        try:
            data = json.loads(raw)
        except ValueError:
            raise ModelCallError(
                f"server sent invalid JSON: {raw[:200].decode('utf-8', 'replace')!r}",
                retryable=True,
            ) from None
        return parse_chat_response(data, latency_s=latency, model=self.model)
