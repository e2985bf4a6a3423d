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
"""

from __future__ import annotations

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

__all__ = ["Passthrough", "PassthroughFailed", "PassthroughReply", "passthrough_budget"]

#: Seconds a fetched list of the upstreams' model names is trusted.
MODELS_TTL_S = 30.0
#: The largest non-streamed upstream answer relayed (a 131072-token reply is ~1 MB).
MAX_REPLY_BYTES = 64 * 1024 * 1024


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
        self._fetched_at: float | None = None

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

    async def models(self) -> tuple[str, ...]:
        """The names the upstreams serve: ``--model`` first, then theirs (cached)."""
        now = time.monotonic()
        if self._fetched_at is not None and now - self._fetched_at < MODELS_TTL_S:
            return self._names
        names = [self.served_model]
        for url in self.upstreams:
            try:
                async with self._client().get(
                    f"{url}/models", timeout=aiohttp.ClientTimeout(total=5)
                ) as resp:
                    listed = (await resp.json()).get("data", []) if resp.status == 200 else []
            except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
                continue  # a replica down now: the others' names (and --model) stand
            for entry in listed if isinstance(listed, list) else []:
                name = entry.get("id") if isinstance(entry, dict) else None
                if isinstance(name, str) and name and name not in names:
                    names.append(name)
        self._names = tuple(names)
        self._fetched_at = now
        return self._names

    async def serves(self, name: str) -> bool:
        """Whether ``name`` is a model an upstream serves."""
        return name == self.served_model or name in await self.models()

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
            body = await resp.content.read(MAX_REPLY_BYTES + 1)
            if len(body) > MAX_REPLY_BYTES:
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


class PassthroughFailed(APIError):
    """A relayed call that got no answer, failing as ``failure`` would (its ``kind``)."""

    def __init__(self, upstream: int, failure: type[ModelCallError]) -> None:
        super().__init__(
            502, f"upstream #{upstream} call failed: {failure.kind_text}", code="upstream_error"
        )
        self.upstream = upstream
        self.kind = failure.kind
