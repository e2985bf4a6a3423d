"""Plain model names: the request proxied to an upstream as it came, the answer as it went.

Why: a client pointed at ``pacore serve`` (a chat front end, an agent that
sometimes wants one plain call) asks for the upstream's own model by name,
as it would through optillm or LiteLLM; answering 404 forces a second base
URL on it. So a model name that is not a PaCoRe method and that an upstream
serves (``--model``, or a name in an upstream's ``GET /v1/models``) is sent
to an upstream unchanged -- the body's bytes, ``stream`` and all -- and its
answer comes back unchanged: the JSON body byte for byte, or the SSE stream
chunk by chunk as it arrives.

It stays inside the server's limits: the request holds a run slot (the same
FIFO queue as PaCoRe runs), its ``n`` samples hold room in
``--max-samples-in-flight``, and ``max_tokens``/``max_completion_tokens`` over
``--max-tokens-cap`` or ``n`` over ``--max-samples-per-request`` get a 400
naming the field before anything is sent. Errors keep the server's rule:
an upstream's error answer keeps its status but not its body (which may
quote the upstream), and a failed connection is a 502 naming the kind only.

What an upstream sends is bounded before it is kept (issue 31):

- a JSON answer is read to its end or refused: more than
  :data:`MAX_REPLY_BYTES` (declared or sent, after decompression) or a body
  cut short is a 502, never a truncated 200 (one ``read(n)`` returned what
  was buffered: 88 KB of a 200 KB answer went out as HTTP 200);
- an upstream's ``GET /models`` is read up to :data:`MAX_MODELS_BYTES` (past
  that its list is skipped, logged), parsed off the event loop, and keeps
  its first :data:`MAX_MODEL_NAMES` names of at most
  :data:`MAX_MODEL_NAME_CHARS` characters (the rest dropped, logged); one
  refresh at a time, whatever the number of requests waiting on it (5M names
  took the server to 2.39 GB and no answer in 120 s).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from pacore_graph.errors import (
    ModelCallError,
    ResponseTooLargeError,
    UpstreamTimeoutError,
    UpstreamTransportError,
)
from pacore_graph.llm.credentials import resolve_api_key
from pacore_graph.serve.errors import APIError
from pacore_graph.settings.request_limits import RequestLimitError, RequestLimits

__all__ = [
    "MAX_MODELS_BYTES",
    "MAX_MODEL_NAMES",
    "MAX_MODEL_NAME_CHARS",
    "MAX_REPLY_BYTES",
    "Passthrough",
    "PassthroughFailed",
    "PassthroughReply",
    "passthrough_budget",
]

_log = logging.getLogger("pacore_graph.serve")

#: Seconds a fetched list of the upstreams' model names is trusted.
MODELS_TTL_S = 30.0
#: The largest non-streamed upstream answer relayed (a 131072-token reply is ~1 MB).
MAX_REPLY_BYTES = 64 * 1024 * 1024
#: The largest upstream ``GET /models`` body read: OpenAI's own list is ~10 KB, a
#: vLLM entry ~1 KB; decoded JSON takes up to ~25x its bytes, so this bounds memory too.
MAX_MODELS_BYTES = 2 * 1024 * 1024
#: The most names kept from one upstream's list.
MAX_MODEL_NAMES = 4096
#: The longest model name kept (longer ones are skipped).
MAX_MODEL_NAME_CHARS = 256


def passthrough_budget(body: Mapping[str, Any], limits: RequestLimits) -> int:
    """The request's sample count ``n`` after the server's caps; 400 naming the field."""
    for field in ("max_completion_tokens", "max_tokens"):
        value = body.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise APIError(400, f"'{field}' must be an integer", param=field)
        try:
            limits.check(max_tokens=value)
        except RequestLimitError as exc:
            raise APIError(400, f"'{field}': {exc}", param=field) from None
    n = body.get("n", 1)
    if n is None:
        n = 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise APIError(400, "'n' must be a positive integer", param="n")
    if n > limits.max_samples_per_request:
        raise APIError(
            400,
            f"'n': {n} samples asked; at most {limits.max_samples_per_request} per request "
            "(max_samples_per_request)",
            param="n",
        )
    return n


@dataclass(slots=True)
class PassthroughReply:
    """An upstream's answer: its status and, for a stream, the open response to relay."""

    upstream: int
    status: int
    content_type: str
    body: bytes
    stream: aiohttp.ClientResponse | None = None
    on_close: Callable[[], None] | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The streamed body as it arrives; the upstream response is closed however it ends."""
        assert self.stream is not None
        try:
            async for chunk in self.stream.content.iter_any():
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        """Let the upstream response go (an unread one closes its connection); idempotent."""
        if self.stream is not None:
            self.stream.release()
        if self.on_close is not None:
            on_close, self.on_close = self.on_close, None
            on_close()


class Passthrough:
    """The upstreams' own model names, and the one call that relays a request to them.

    Requests go to the replica with the fewest passthrough requests in
    flight (ties: the lowest index).
    """

    def __init__(
        self,
        upstreams: Sequence[str],
        served_model: str,
        *,
        api_key: str | None = None,
        read_timeout_s: float = 600.0,
    ) -> None:
        self.upstreams = [u.rstrip("/") for u in upstreams]
        self.served_model = served_model
        self._api_key = api_key
        self._read_timeout_s = read_timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._in_flight = [0] * len(self.upstreams)
        self._names: tuple[str, ...] = (served_model,)
        self._known = frozenset(self._names)
        self._fetched_at: float | None = None
        self._refreshing = asyncio.Lock()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {resolve_api_key(self._api_key)}"},
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=10, sock_read=self._read_timeout_s
                ),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _fresh(self) -> bool:
        fetched = self._fetched_at
        return fetched is not None and time.monotonic() - fetched < MODELS_TTL_S

    async def models(self) -> tuple[str, ...]:
        """The names the upstreams serve: ``--model`` first, then theirs (cached).

        One refresh at a time: requests arriving meanwhile wait for it and
        share its list, so a slow or huge upstream list is fetched once.
        """
        if self._fresh():
            return self._names
        async with self._refreshing:
            if self._fresh():
                return self._names
            names = dict.fromkeys([self.served_model])
            for index, url in enumerate(self.upstreams):
                for name in await self._listed(index, url):
                    names.setdefault(name)
            self._names = tuple(names)
            self._known = frozenset(names)
            self._fetched_at = time.monotonic()
            return self._names

    async def _listed(self, index: int, url: str) -> list[str]:
        """Upstream ``index``'s model names, bounded (module doc); ``[]`` if it has none now."""
        try:
            async with self._client().get(
                f"{url}/models", timeout=aiohttp.ClientTimeout(total=5)
            ) as resp:
                if resp.status != 200:
                    return []
                raw = await _read_capped(resp, MAX_MODELS_BYTES)
        except (aiohttp.ClientError, TimeoutError):
            return []  # a replica down now: the others' names (and --model) stand
        if raw is None:
            _log.warning(
                "upstream #%d's model list is larger than %d bytes: its names are not served",
                index,
                MAX_MODELS_BYTES,
            )
            return []
        return await asyncio.to_thread(_model_names, raw, index)

    async def serves(self, name: str) -> bool:
        """Whether ``name`` is a model an upstream serves."""
        if name == self.served_model:
            return True
        await self.models()
        return name in self._known

    async def forward(self, raw: bytes, *, stream: bool) -> PassthroughReply:
        """Send the body as it came; the answer read whole, or opened for relaying."""
        index = min(range(len(self.upstreams)), key=lambda i: (self._in_flight[i], i))
        self._in_flight[index] += 1
        try:
            resp = await self._client().post(
                f"{self.upstreams[index]}/chat/completions",
                data=raw,
                headers={"Content-Type": "application/json"},
            )
        except TimeoutError:
            self._in_flight[index] -= 1
            raise PassthroughFailed(index, UpstreamTimeoutError) from None
        except aiohttp.ClientError:
            self._in_flight[index] -= 1
            raise PassthroughFailed(index, UpstreamTransportError) from None
        content_type = resp.headers.get("Content-Type", "application/json")
        try:
            if stream and resp.status == 200:
                opened = PassthroughReply(
                    index, resp.status, content_type, b"", stream=resp, on_close=self._done(index)
                )
                resp = None  # type: ignore[assignment]  # released by the relay
                return opened
            body = await _read_capped(resp, MAX_REPLY_BYTES)
            if body is None:
                raise PassthroughFailed(index, ResponseTooLargeError)
            return PassthroughReply(index, resp.status, content_type, body)
        except TimeoutError:
            raise PassthroughFailed(index, UpstreamTimeoutError) from None
        except aiohttp.ClientError:
            raise PassthroughFailed(index, UpstreamTransportError) from None
        finally:
            if resp is not None:
                resp.release()
                self._in_flight[index] -= 1

    def _done(self, index: int) -> Callable[[], None]:
        def done() -> None:
            self._in_flight[index] -= 1

        return done


async def _read_capped(resp: aiohttp.ClientResponse, cap: int) -> bytes | None:
    """The whole body (decompressed), or ``None`` past ``cap`` bytes, declared or sent.

    Read to its end: a body cut short raises ``aiohttp.ClientPayloadError``
    (a ``ClientError``), never returns what was buffered.
    """
    declared = resp.content_length
    if declared is not None and declared > cap and "Content-Encoding" not in resp.headers:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _model_names(raw: bytes, index: int) -> list[str]:
    """(worker thread) The names of a ``GET /models`` body, bounded; ``[]`` if it is not one."""
    try:
        listed = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    data = listed.get("data") if isinstance(listed, dict) else None
    entries: list[Any] = data if isinstance(data, list) else []
    names: dict[str, None] = {}
    for entry in entries:
        name = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(name, str) and 0 < len(name) <= MAX_MODEL_NAME_CHARS:
            names.setdefault(name)
            if len(names) == MAX_MODEL_NAMES:
                if len(entries) > MAX_MODEL_NAMES:
                    _log.warning(
                        "upstream #%d lists more than %d models: the first %d are served",
                        index,
                        MAX_MODEL_NAMES,
                        MAX_MODEL_NAMES,
                    )
                break
    return list(names)


class PassthroughFailed(APIError):
    """A relayed call that got no answer, failing as ``failure`` would (its ``kind``)."""

    def __init__(self, upstream: int, failure: type[ModelCallError]) -> None:
        super().__init__(
            502, f"upstream #{upstream} call failed: {failure.kind_text}", code="upstream_error"
        )
        self.upstream = upstream
        self.kind = failure.kind
