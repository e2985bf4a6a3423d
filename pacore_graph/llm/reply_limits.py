"""Reading an upstream's answer under a size cap derived from the request.

Why: a chat answer is read into memory before it is parsed, and an upstream
that sends a 200 MB body (a bug, a misconfigured proxy, a hostile server) took
a run to a 4.5 GB peak and went on, as a reference, into an 839 MB
next-round request. So every body the direct client reads from an upstream
(the JSON answer, each server-sent event, the body of a non-200 answer) is
read under a cap; over it, the call fails as ``response_too_large``, the
bytes read so far are dropped and the connection is closed.

The cap must never cut an answer a real vLLM sends, so it is generous. Per
sample and per token of ``max_tokens``:

- :data:`TEXT_BYTES_PER_TOKEN` (128) for the token's text in ``content`` or
  ``reasoning`` and, with ``return_token_ids``, its id (a token is about 4
  bytes of text; JSON escapes and long whitespace tokens stay far below);
- with ``logprobs``, :data:`LOGPROB_BYTES_PER_ENTRY` (256) per entry (the
  token, its log-prob and its ``bytes`` list), times ``1 + top_logprobs``;
- over SSE, :data:`EVENT_BYTES_PER_TOKEN` (1 KiB) more: vLLM sends at most one
  event per token and choice (id, model name, ``continuous_usage_stats``...).

plus :data:`PROMPT_ECHO_FACTOR` times the request body (vLLM echoes the
prompt's token ids with ``return_token_ids``) and :data:`SLACK_BYTES` (1 MiB).
With ``max_tokens`` unset, each sample is budgeted as if it were
:data:`UNSET_MAX_TOKENS` (32,768) tokens: 4 MiB of plain text per sample, far
more than a real answer of any length, but a long answer with log-probs wants
an explicit ``max_tokens``. Whatever the request, the cap is at most
:data:`CAP_CEILING` (1 GiB): no answer bigger than that can be parsed here.

An error body is only ever read to :data:`ERROR_HEAD_BYTES` (4 KiB): the
error keeps 300 bytes of it for the operator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from pacore_graph.errors import ResponseTooLargeError

__all__ = [
    "CAP_CEILING",
    "ERROR_HEAD_BYTES",
    "EVENT_BYTES_PER_TOKEN",
    "LOGPROB_BYTES_PER_ENTRY",
    "PROMPT_ECHO_FACTOR",
    "SLACK_BYTES",
    "TEXT_BYTES_PER_TOKEN",
    "UNSET_MAX_TOKENS",
    "read_capped",
    "read_error_head",
    "reply_cap",
    "sse_lines",
    "too_large",
]

TEXT_BYTES_PER_TOKEN = 128
LOGPROB_BYTES_PER_ENTRY = 256
EVENT_BYTES_PER_TOKEN = 1024
PROMPT_ECHO_FACTOR = 8
SLACK_BYTES = 1 << 20
UNSET_MAX_TOKENS = 32_768
CAP_CEILING = 1 << 30
ERROR_HEAD_BYTES = 4096


def _count(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reply_cap(body: Mapping[str, Any], *, request_bytes: int, streamed: bool = False) -> int:
    """The most bytes an answer to the chat request ``body`` may take (see the module doc).

    Read from the request itself (``n``, ``max_tokens`` or
    ``max_completion_tokens``, ``logprobs``, ``top_logprobs``), so every
    request a call makes (a retry, a split, a single sample) gets its own.
    """
    n = max(1, _count(body, "n") or 1)
    tokens = _count(body, "max_completion_tokens") or _count(body, "max_tokens")
    tokens = max(1, tokens) if tokens is not None else UNSET_MAX_TOKENS
    per_token = TEXT_BYTES_PER_TOKEN
    if body.get("logprobs"):
        per_token += LOGPROB_BYTES_PER_ENTRY * (1 + max(0, _count(body, "top_logprobs") or 0))
    if streamed:
        per_token += EVENT_BYTES_PER_TOKEN
    cap = SLACK_BYTES + PROMPT_ECHO_FACTOR * request_bytes + n * tokens * per_token
    return min(cap, CAP_CEILING)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def too_large(url: str, cap: int, *, what: str = "answer") -> ResponseTooLargeError:
    """The error for an answer over its cap: not retried (it would come back as big)."""
    return ResponseTooLargeError(
        f"response too large: the {what} from {url} exceeded the {_mib(cap)} cap for this "
        "request (set from max_tokens and n); it was dropped unread"
    )


async def read_capped(resp: aiohttp.ClientResponse, cap: int, url: str) -> bytes:
    """The whole body, or :func:`too_large` raised once more than ``cap`` bytes arrive.

    A ``Content-Length`` over the cap fails before anything is read; a
    chunked (or lying) body fails as soon as the running count passes it.
    Either way the connection is closed, so the rest is never received.
    """
    declared = resp.content_length
    if declared is not None and declared > cap:
        resp.close()
        raise too_large(url, cap)
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > cap:
            parts.clear()  # nothing of it is kept
            resp.close()
            raise too_large(url, cap)
        parts.append(chunk)
    return b"".join(parts)


async def read_error_head(resp: aiohttp.ClientResponse, limit: int = ERROR_HEAD_BYTES) -> bytes:
    """At most ``limit`` bytes of an error body; the rest is not read (connection closed)."""
    head = bytearray()
    while len(head) < limit:
        chunk = await resp.content.read(limit - len(head))
        if not chunk:
            break
        head += chunk
    if not resp.content.at_eof():
        resp.close()
    return bytes(head)


async def sse_lines(
    resp: aiohttp.ClientResponse, cap: int, url: str, *, line_cap: int | None = None
) -> AsyncIterator[bytes]:
    """The lines of an event stream, stripped; :func:`too_large` past ``cap`` or ``line_cap``.

    ``cap`` bounds the whole stream, ``line_cap`` (default: ``cap``) one
    line: one event can carry at most a whole answer (a server that sends
    the answer as one delta), so the JSON answer's cap is the right bound,
    and an endless line (no newline ever) fails there instead of growing in
    memory. aiohttp's own line reader is not used: it raises a bare
    ``ValueError`` at 128 KiB, which cuts a legitimate event carrying a
    long prompt's token ids.
    """
    line_cap = cap if line_cap is None else min(cap, line_cap)
    buffer = bytearray()
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > cap:
            buffer.clear()
            resp.close()
            raise too_large(url, cap, what="event stream")
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > line_cap:
                break
            line = bytes(buffer[start:end]).strip()
            start = end + 1
            if line:
                yield line
        del buffer[:start]
        if len(buffer) > line_cap:  # one line longer than any answer: dropped unread
            buffer.clear()
            resp.close()
            raise too_large(url, line_cap, what="event")
    # A last line without its newline is dropped, as SSE dispatches only complete
    # events: the stream then ends without [DONE], which the caller reports.
