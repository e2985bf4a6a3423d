"""The HTTP side of a model call: which statuses to retry, what a failure is, reading SSE.

One place decides how a non-200 answer, a refused or cut connection, a
timeout and a server's mid-stream error event become a
:class:`~pacore_graph.errors.ModelCallError` of the right branch, so the JSON
path, the streamed path and the multi-endpoint client agree on what is
retryable and what is the server's fault as a whole. Event streams are read
here once (:func:`sse_data`, :func:`decode_event`) for both streamed paths.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import aiohttp

from pacore_graph.errors import (
    MalformedReplyError,
    ModelCallError,
    UpstreamStatusError,
    UpstreamStreamError,
    UpstreamTimeoutError,
    UpstreamTransportError,
)
from pacore_graph.llm.reply_checks import malformed
from pacore_graph.llm.reply_limits import sse_lines

__all__ = [
    "decode_event",
    "http_error",
    "parse_retry_after",
    "retryable_status",
    "sse_data",
    "stream_error",
    "transport_errors",
]

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: The server as a whole is busy: smaller requests would not help.
_OVERLOADED_STATUS = frozenset({429, 503})

_loads: Callable[[bytes], Any]
try:  # a vLLM stream is one event per token and choice: parsing is the client's hot loop
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson comes with langsmith (CPython)
    _loads = json.loads


def retryable_status(status: int) -> bool:
    """Whether an HTTP error status is one retries are for (429, 5xx, a few 4xx)."""
    return status in _RETRYABLE_STATUS or status >= 500


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


def http_error(url: str, status: int, raw: bytes, retry_after: str | None) -> UpstreamStatusError:
    """The error for a non-200 answer: status, the body's head, whether and when to retry."""
    detail = " ".join(raw[:300].decode("utf-8", "replace").split()) or "(empty body)"
    return UpstreamStatusError(
        f"HTTP {status} from {url}: {detail}",
        status=status,
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
        raise UpstreamTimeoutError(
            f"timed out after {round(timeout, 2):g}s {doing} {url}", retryable=True
        ) from None
    except aiohttp.ClientError as exc:
        detail = " ".join(str(exc).split())[:200]
        raise UpstreamTransportError(
            f"cannot reach {url}: {type(exc).__name__}: {detail}",
            retryable=True,
            server_wide=isinstance(exc, aiohttp.ClientConnectorError),
        ) from None


def stream_error(event: Mapping[str, Any]) -> ModelCallError:
    """The error event a server sends when generation fails after the stream began.

    vLLM sends ``{"error": {"message", "type", "code"}}`` (older versions the
    fields at the top level, with ``"object": "error"``) and then ``[DONE]``.
    """
    error = event.get("error")
    detail = error if isinstance(error, Mapping) else event
    message = " ".join(str(detail.get("message") or json.dumps(dict(event))).split())[:300]
    code = detail.get("code")
    status = (
        int(code)
        if (isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599)
        or (isinstance(code, str) and code.isdigit() and len(code) == 3)
        else None
    )
    text = f"server reported an error mid-stream: {message}"
    if status is None:
        return UpstreamStreamError(text, retryable=True)
    return UpstreamStatusError(text, status=status, retryable=retryable_status(status))


async def sse_data(
    resp: aiohttp.ClientResponse, cap: int, url: str, *, line_cap: int | None = None
) -> AsyncIterator[bytes]:
    """The ``data:`` payloads of an event stream, stripped (``b"[DONE]"`` included).

    Size limits are :func:`~pacore_graph.llm.reply_limits.sse_lines`'.
    """
    async for line in sse_lines(resp, cap, url, line_cap=line_cap):
        if line.startswith(b"data:"):
            yield line[5:].strip()


def decode_event(payload: bytes) -> dict[str, Any]:
    """One stream event as an object; the server's error event raised as its error.

    Raises :class:`~pacore_graph.errors.MalformedReplyError` for a payload that
    is not a JSON object.
    """
    try:
        event = _loads(payload)
    except ValueError:
        raise MalformedReplyError(
            f"server sent an invalid stream event: {payload[:200]!r}"
        ) from None
    if not isinstance(event, dict):
        raise malformed(f"a stream event is {payload[:60]!r}, not an object")
    if "error" in event or event.get("object") == "error":
        raise stream_error(event)
    return event
