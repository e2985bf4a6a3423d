"""What a request body must be before the server parses it: JSON, bounded, sent in time.

``pacore serve`` starts upstream work for whoever can reach it, so the body
is checked before anything else looks at it, by an ASGI middleware
(:class:`BodyGuard`) around the app:

- only ``Content-Type: application/json`` is accepted (415 otherwise). Besides
  being the API's format, this is what stops a web page open on the same
  machine from starting runs on a keyless localhost server: a cross-origin
  ``text/plain`` or form POST needs no CORS preflight, a JSON one does;
- a body over ``max_body_bytes`` is refused with 413: at once when its
  ``Content-Length`` says so, else as soon as the bytes read pass the cap
  (a chunked upload), so memory stays bounded whatever is sent;
- a body not fully received within ``body_timeout_s`` gets 408 and the
  connection is closed (a slow-loris upload holds nothing for long).

:func:`decode_json` then bounds the nesting depth (400): a body nested a
thousand deep would otherwise raise ``RecursionError`` in the decoder or in
the code that walks it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pacore_graph.serve.errors import APIError, error_body_for

__all__ = ["BodyGuard", "decode_json", "json_depth"]

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class BodyGuard:
    """ASGI middleware: refuse a request body that is not JSON, too large or too slow."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/json":
            await _refuse(scope, receive, send, 415, "the request body must be application/json")
            return
        length = headers.get("content-length")
        if length is not None and (not length.strip().isdigit() or len(length) > 18):
            await _refuse(scope, receive, send, 400, "invalid Content-Length")
            return
        if length is not None and int(length) > self.max_body_bytes:
            await _refuse(scope, receive, send, 413, self._too_large())
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # nobody to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        await _refuse(scope, receive, send, 413, self._too_large())
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _refuse(
                scope,
                receive,
                send,
                408,
                f"the request body was not received within {self.body_timeout_s:g} s",
            )
            return
        body = b"".join(chunks)
        del chunks
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then http.disconnect, as the app expects

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_body_bytes} bytes"


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """An error in the path's protocol's shape; the connection closes (the body may be unread)."""
    body, sent = error_body_for(str(scope.get("path", "")), status, message)
    response = JSONResponse(body, status_code=sent, headers={"Connection": "close"})
    await response(scope, receive, send)


def json_depth(value: Any, limit: int) -> int:
    """The nesting depth of a decoded JSON value, counted iteratively up to ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def decode_json(raw: bytes, *, max_depth: int) -> Any:
    """The decoded body; :class:`APIError` 400 for bad JSON or nesting over ``max_depth``."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise APIError(400, f"the request body is nested deeper than {max_depth}") from None
    except (ValueError, UnicodeDecodeError):
        raise APIError(400, "the request body is not valid JSON") from None
    if json_depth(value, max_depth) > max_depth:
        raise APIError(400, f"the request body is nested deeper than {max_depth}")
    return value
