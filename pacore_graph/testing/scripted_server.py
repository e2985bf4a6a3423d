"""A scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

Why our own server instead of mocking the client: PaCoRe fans out many concurrent
HTTP calls through LangChain / the ``openai`` SDK, and the bugs worth catching live
in that path (retries, connection errors, ``n`` choices, reasoning field names,
truncation, streaming).  A real HTTP server exercises all of it, while a scripted
one stays fast, free and deterministic.

Determinism is *by input, never by call order*: a reply depends only on the
request (last user message, sample index, seed, ...), so results do not change
when a graph reorders or parallelises its calls.  Failures are deterministic too:
they are keyed by a hash of the request body and the attempt number for that
same body, so a retry of a failed call can succeed.

Tokens are counted as whitespace-separated words (``str.split()``).  That is
crude but stable and cheap, and it is all tests need to check ``max_tokens``
truncation and usage accounting.

Three ways to run it:

1. in-process from async code: ``async with ScriptedServer() as srv: srv.base_url``;
2. from sync code in a background thread with its own loop:
   ``with ScriptedServer().run_in_thread() as srv: ...``;
3. as a separate process (benchmarks):
   ``python -m pacore_graph.testing.scripted_server --port 0`` prints
   ``READY http://127.0.0.1:PORT/v1`` and serves until SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import inspect
import itertools
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from aiohttp import web

from pacore_graph.testing.logprobs import Confidence, logprob_entries, requested_top_logprobs
from pacore_graph.testing.loopback_server import (
    LoopbackServer,
    serve_until_signalled,
    server_arg_parser,
)
from pacore_graph.testing.script import (
    RespondFn,
    RespondResult,
    ScriptedReply,
    ScriptedRequest,
    ScriptedToolCall,
)

__all__ = [
    "DISCONNECT_STATUS",
    "FailureMode",
    "LoggedRequest",
    "ReasoningMode",
    "RespondFn",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedServer",
    "ScriptedToolCall",
    "count_tokens",
    "default_respond",
    "last_user_text",
    "main",
    "prompt_tokens",
]

try:  # orjson is optional; it roughly halves serialisation time under benchmark load.
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    _loads = json.loads


ReasoningMode = Literal["none", "reasoning", "reasoning_content", "think"]
"""How the reply's reasoning is exposed, mimicking the servers PaCoRe talks to.

* ``"none"``: a server without a reasoning parser serving a non-reasoning model:
  only ``content`` is sent; a separate ``ScriptedReply.reasoning`` is dropped, and
  ``<think>`` tags a responder wrote into ``content`` stay there.
* ``"reasoning"``: vLLM's current field, ``message.reasoning``.
* ``"reasoning_content"``: the older vLLM / DeepSeek field name.
* ``"think"``: reasoning inlined as ``<think>...</think>`` at the start of ``content``.
"""

FailureMode = Literal["status", "disconnect"]
"""``"status"``: answer with an HTTP error; ``"disconnect"``: drop the connection."""

_REASONING_MODES: tuple[str, ...] = get_args(ReasoningMode)
_FAILURE_MODES: tuple[str, ...] = get_args(FailureMode)
_THINK_RE = re.compile(r"\A\s*<think>(.*?)</think>\s*", re.DOTALL)
_WORD_RE = re.compile(r"\S+")
_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
DISCONNECT_STATUS = 0
"""Status recorded in the request log for a request whose connection was dropped."""


FailWhenFn = Callable[[ScriptedRequest], int | None]


@dataclass(slots=True)
class LoggedRequest:
    """One request as received, for tests that count calls or check prompts."""

    body: dict[str, Any]
    headers: dict[str, str]
    status: int
    """HTTP status answered; ``0`` (``DISCONNECT_STATUS``) if the connection was dropped."""


def count_tokens(text: str | None) -> int:
    """Token count used everywhere here: whitespace-separated words."""
    return len(text.split()) if text else 0


def _stable_hex(*parts: object, size: int = 8) -> str:
    """A process-independent hash (unlike ``hash()``, which is salted per process)."""
    data = "\x1f".join(str(p) for p in parts).encode()
    return hashlib.blake2b(data, digest_size=size).hexdigest()


def default_respond(request: ScriptedRequest, reasoning_words: int = 6) -> ScriptedReply:
    """Deterministic reply from the last user message, sample index and seed.

    The seed is part of the input because PaCoRe's explorers often send the
    *same* prompt with ``n=1`` and different seeds; without it they would all
    agree and synthesis tests would be vacuous.
    """
    digest = _stable_hex(request.last_user, request.sample_index, request.seed)
    answer = digest[:5]
    middle = [f"step{i}-{digest[(5 + i) % len(digest)]}" for i in range(reasoning_words - 2)]
    reasoning = " ".join(["considering", *middle, answer])
    return ScriptedReply(content=f"The answer is {answer}.", reasoning=reasoning)


def _text_of(content: Any) -> str:
    """Message content as text: strings as-is, content-part lists joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last user message (what responders script on), or ``""``."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def prompt_tokens(messages: Sequence[Any]) -> int:
    """The prompt's token count as both fake servers report it in ``usage``."""
    return sum(count_tokens(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))


def _cut_words(text: str, n_words: int) -> str:
    """The first ``n_words`` words of ``text``, original spacing kept."""
    if n_words <= 0:
        return ""
    for i, match in enumerate(_WORD_RE.finditer(text)):
        if i == n_words - 1:
            return text[: match.end()]
    return text


def _pieces(text: str, words_per_piece: int) -> list[str]:
    """Split text into stream deltas of a few words that concatenate back exactly."""
    starts = [m.start() for m in _WORD_RE.finditer(text)][::words_per_piece]
    if len(starts) <= 1:
        return [text] if text else []
    starts[0] = 0
    return [text[a:b] for a, b in itertools.pairwise([*starts, len(text)])]


@dataclass(slots=True)
class _Choice:
    """A rendered choice, kept structured so both JSON and SSE can be built from it."""

    content: str | None
    reasoning: str | None
    finish_reason: str
    tokens: int
    tool_calls: list[dict[str, Any]]
    confidence: Confidence = None


class ScriptedServer(LoopbackServer):
    """An aiohttp server speaking the OpenAI chat-completions API from a script.

    See the module docstring for the three ways to run it.  ``requests`` is the
    arrival-ordered log (if ``log_requests``); ``request_count`` is always kept.

    Options (all but ``respond`` keyword-only):

    * ``respond``: reply for one choice; called once per choice with
      ``sample_index`` 0..n-1.  Defaults to :func:`default_respond`.
    * ``reasoning_mode``: see :data:`ReasoningMode`.
    * ``latency`` / ``latency_jitter``: seconds slept per request (never blocking
      the loop); the jitter, in ``[0, latency_jitter)``, is a hash of the body and
      attempt, so timings are reproducible too.
    * Failures, checked in this order after the latency: ``fail_when(request)``
      returning a status (it sees the request with ``sample_index=0``); the first
      ``fail_first`` attempts of each distinct body; a stable hash of (body,
      attempt) below ``failure_rate``.  A "distinct body" is the raw request body:
      a retry resends the same bytes, while explorers that differ by ``seed`` are
      distinct calls.  ``failure_mode="disconnect"`` drops the connection instead
      of answering ``failure_status`` (logged as status 0).
    * ``retry_after``: seconds sent as ``Retry-After`` with each scripted failure.
    * ``ignore_n=True`` answers one choice whatever ``n`` asks, like llama.cpp.
    * ``log_requests=False`` skips the log, for benchmarks.
    * ``stream_words_per_chunk`` / ``stream_chunk_delay``: SSE delta size, and an
      optional pause between events (0 sends the whole stream in one write).
    * ``concurrent_choices=True`` awaits the ``n`` responders of a JSON request
      together, as a server decodes ``n`` sequences at once (by default one
      after the other, so slow async responders add up). A streamed request
      always runs them together and sends each choice when it is ready.
    * ``shutdown_timeout``: how long :meth:`stop` waits for in-flight requests.
    """

    def __init__(
        self,
        respond: RespondFn | None = None,
        *,
        model: str = "scripted",
        host: str = "127.0.0.1",
        port: int = 0,
        reasoning_mode: ReasoningMode = "reasoning",
        latency: float = 0.0,
        latency_jitter: float = 0.0,
        failure_rate: float = 0.0,
        failure_status: int = 500,
        fail_first: int = 0,
        fail_when: FailWhenFn | None = None,
        failure_mode: FailureMode = "status",
        retry_after: float | None = None,
        ignore_n: bool = False,
        log_requests: bool = True,
        stream_words_per_chunk: int = 4,
        stream_chunk_delay: float = 0.0,
        concurrent_choices: bool = False,
        backlog: int = 4096,
        shutdown_timeout: float = 0.5,
    ) -> None:
        if reasoning_mode not in _REASONING_MODES:
            raise ValueError(f"reasoning_mode must be one of {_REASONING_MODES}")
        if failure_mode not in _FAILURE_MODES:
            raise ValueError(f"failure_mode must be one of {_FAILURE_MODES}")
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError("failure_rate must be in [0, 1]")
        if latency < 0 or latency_jitter < 0:
            raise ValueError("latency and latency_jitter must be >= 0")
        if stream_words_per_chunk < 1:
            raise ValueError("stream_words_per_chunk must be >= 1")
        super().__init__(host=host, port=port, backlog=backlog, shutdown_timeout=shutdown_timeout)
        self.respond: RespondFn = respond or default_respond
        self.model = model
        self.reasoning_mode: ReasoningMode = reasoning_mode
        self.latency = latency
        self.latency_jitter = latency_jitter
        self.failure_rate = failure_rate
        self.failure_status = failure_status
        self.fail_first = fail_first
        self.fail_when = fail_when
        self.failure_mode: FailureMode = failure_mode
        self.retry_after = retry_after
        self.ignore_n = ignore_n
        self.log_requests = log_requests
        self.stream_words_per_chunk = stream_words_per_chunk
        self.stream_chunk_delay = stream_chunk_delay
        self.concurrent_choices = concurrent_choices

        self.requests: list[LoggedRequest] = []
        self.request_count = 0
        self._attempts: dict[str, int] = {}
        self._ids = itertools.count()
        self._id_prefix = _stable_hex(time.time_ns(), id(self), size=4)

    # ------------------------------------------------------------------ state

    def reset_log(self) -> None:
        """Forget logged requests and the request count (attempt counters stay)."""
        self.requests.clear()
        self.request_count = 0

    def reset_attempts(self) -> None:
        """Forget attempt counters, so ``fail_first`` applies afresh."""
        self._attempts.clear()

    # ------------------------------------------------------------------ handlers

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        body = {
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}],
        }
        return web.Response(body=_dumps(body), content_type="application/json")

    def _log(self, body: dict[str, Any], headers: dict[str, str], status: int) -> None:
        if self.log_requests:
            self.requests.append(LoggedRequest(body, headers, status))

    def _error(self, status: int, message: str) -> web.Response:
        err_type = _ERROR_TYPES.get(status, "server_error")
        payload = {
            "error": {"message": message, "type": err_type, "param": None, "code": str(status)}
        }
        return web.Response(status=status, body=_dumps(payload), content_type="application/json")

    def _disconnect(self, request: web.Request) -> web.StreamResponse:
        """Drop the TCP connection without answering, like a crashed upstream."""
        transport = request.transport
        if transport is not None:
            transport.abort()
        # Nothing reaches the client: the transport is gone.  aiohttp discards
        # writes to an aborted transport, so any response object will do.
        return web.Response(status=500)

    def _failure_status(self, req: ScriptedRequest, key: str) -> int | None:
        """The status to fail with, or None.  Pure function of input and attempt."""
        if self.fail_when is not None:
            status = self.fail_when(req)
            if status is not None:
                return status
        if req.attempt < self.fail_first:
            return self.failure_status
        if self.failure_rate > 0.0:
            draw = int(_stable_hex("fail", key, req.attempt), 16) / float(1 << 64)
            if draw < self.failure_rate:
                return self.failure_status
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.request_count += 1
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body = _loads(raw)
        except ValueError:
            self._log({"_raw": raw.decode(errors="replace")}, headers, 400)
            return self._error(400, "request body is not valid JSON")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            self._log(body if isinstance(body, dict) else {"_raw": body}, headers, 400)
            return self._error(400, "'messages' must be a non-empty list")

        # Attempts are keyed by the raw body: a retry resends the same bytes, while
        # explorers that differ only by seed are distinct calls.
        key = hashlib.blake2b(raw, digest_size=16).hexdigest()
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1

        last_user = last_user_text(messages)
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
        model = str(body.get("model") or self.model)
        base = ScriptedRequest(
            messages=messages,
            last_user=last_user,
            sample_index=0,
            model=model,
            params=params,
            headers=headers,
            attempt=attempt,
        )

        delay = self.latency
        if self.latency_jitter:
            delay += self.latency_jitter * (int(_stable_hex("lat", key, attempt), 16) / 2**64)
        if delay > 0:
            await asyncio.sleep(delay)

        status = self._failure_status(base, key)
        if status is not None:
            if self.failure_mode == "disconnect":
                self._log(body, headers, DISCONNECT_STATUS)
                return self._disconnect(request)
            self._log(body, headers, status)
            response = self._error(status, f"scripted failure (attempt {attempt})")
            if self.retry_after is not None:
                response.headers["Retry-After"] = f"{self.retry_after:g}"
            return response

        n = params.get("n") or 1
        if not isinstance(n, int) or n < 1:
            self._log(body, headers, 400)
            return self._error(400, "'n' must be a positive integer")
        if self.ignore_n:
            n = 1
        limit = params.get("max_completion_tokens")
        if limit is None:
            limit = params.get("max_tokens")
        if limit is not None and not isinstance(limit, int):
            self._log(body, headers, 400)
            return self._error(400, "'max_tokens' must be an integer")

        if body.get("stream"):
            return await self._stream(request, body, headers, base, n, limit)
        choices: list[_Choice] = []
        try:
            if self.concurrent_choices:
                choices = list(
                    await asyncio.gather(*(self._reply(base, i, limit) for i in range(n)))
                )
            for i in range(len(choices), n):
                choices.append(await self._reply(base, i, limit))
        except Exception as exc:  # a broken responder is a test bug: surface it as a 500
            self._log(body, headers, 500)
            return self._error(500, f"responder raised {type(exc).__name__}: {exc}")

        prompt_count = prompt_tokens(messages)
        completion_tokens = sum(c.tokens for c in choices)
        usage = {
            "prompt_tokens": prompt_count,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_count + completion_tokens,
        }
        completion_id = f"chatcmpl-{self._id_prefix}{next(self._ids):x}"
        created = int(time.time())
        self._log(body, headers, 200)
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": i,
                    "message": self._message(c),
                    "logprobs": _logprobs(c, requested_top_logprobs(body))
                    if body.get("logprobs")
                    else None,
                    "finish_reason": c.finish_reason,
                    **({"token_ids": _token_ids(c)} if body.get("return_token_ids") else {}),
                }
                for i, c in enumerate(choices)
            ],
            "usage": usage,
        }
        return web.Response(body=_dumps(payload), content_type="application/json")

    # ------------------------------------------------------------------ rendering

    async def _reply(self, base: ScriptedRequest, index: int, limit: int | None) -> _Choice:
        """The responder's reply for choice ``index``, rendered."""
        result = self.respond(base if index == 0 else _replace_index(base, index))
        if inspect.isawaitable(result):
            result = await result
        return self._render(cast(RespondResult, result), limit)

    def _render(self, result: RespondResult, limit: int | None) -> _Choice:
        """Apply reasoning mode and ``max_tokens`` truncation to one reply."""
        reply = ScriptedReply(content=result) if isinstance(result, str) else result
        content: str | None = reply.content
        reasoning = reply.reasoning
        mode = self.reasoning_mode
        if mode == "none":
            reasoning = None
        elif reasoning is None and mode != "think" and content:
            # A reasoning parser splits inline think tags out of the text, as vLLM does.
            match = _THINK_RE.match(content)
            if match:
                reasoning, content = match.group(1), content[match.end() :]

        r_words = count_tokens(reasoning)
        c_words = count_tokens(content)
        tokens = reply.completion_tokens
        if tokens is None:
            tokens = r_words + c_words
        truncated = limit is not None and tokens > limit
        if truncated and limit is not None:
            tokens = limit
            if reasoning is not None and r_words >= limit:
                # Ran out while thinking: vLLM then sends no content at all.
                reasoning, content = _cut_words(reasoning, limit), None
            else:
                content = _cut_words(content or "", limit - r_words)
        if mode == "think" and reasoning is not None:
            closed = "</think>\n\n" + content if content is not None else ""
            content, reasoning = f"<think>{reasoning}{closed}", None

        tool_calls = (
            []
            if truncated
            else [_tool_call_dict(call, i) for i, call in enumerate(reply.tool_calls)]
        )
        finish = reply.finish_reason or (
            "length" if truncated else "tool_calls" if tool_calls else "stop"
        )
        return _Choice(content, reasoning, finish, tokens, tool_calls, reply.confidence)

    def _message(self, choice: _Choice) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": choice.content}
        if choice.reasoning is not None:
            message[self.reasoning_mode] = choice.reasoning
        if choice.tool_calls:
            message["tool_calls"] = choice.tool_calls
        return message

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        headers: dict[str, str],
        base: ScriptedRequest,
        n: int,
        limit: int | None,
    ) -> web.StreamResponse:
        """Server-sent events: per choice its role, reasoning and content deltas and finish.

        The ``n`` responders run concurrently and each choice is sent the
        moment its reply is ready (choices ready together go in index order),
        as a server decoding ``n`` sequences does; then usage (when
        ``stream_options.include_usage``) and ``[DONE]``. With
        ``continuous_usage_stats`` too, a choice's finish chunk carries its
        own completion tokens, as vLLM's do. A responder that raises before
        anything was sent makes the answer a 500; after that, an error event
        (vLLM's shape) then ``[DONE]``, the other choices abandoned.
        """
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        include_usage = bool(options.get("include_usage"))
        continuous = include_usage and bool(options.get("continuous_usage_stats"))
        model = base.model
        prompt_count = prompt_tokens(base.messages)
        head = {
            "id": f"chatcmpl-{self._id_prefix}{next(self._ids):x}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        want_logprobs = bool(body.get("logprobs"))
        top_k = requested_top_logprobs(body)

        def chunk(
            index: int,
            delta: dict[str, Any],
            finish: str | None = None,
            tokens: int | None = None,
            logprobs: list[dict[str, Any]] | None = None,
        ) -> bytes:
            lp = {"content": logprobs} if logprobs is not None else None
            choice = {"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}
            event: dict[str, Any] = {**head, "choices": [choice]}
            if tokens is not None:
                event["usage"] = {
                    "prompt_tokens": prompt_count,
                    "completion_tokens": tokens,
                    "total_tokens": prompt_count + tokens,
                }
            return b"data: " + _dumps(event) + b"\n\n"

        size = self.stream_words_per_chunk

        def events_of(i: int, c: _Choice) -> list[bytes]:
            events = [chunk(i, {"role": "assistant", "content": ""})]
            words = _choice_words(c)
            position = 0

            def piece_logprobs(piece: str) -> list[dict[str, Any]] | None:
                # Each delta carries the entries of the counted words it holds, as vLLM's do.
                nonlocal position
                if not want_logprobs:
                    return None
                count = len(piece.split())
                taken = words[position : position + count]
                entries = logprob_entries(taken, c.confidence, top_k, start=position)
                position += count
                return entries

            if c.reasoning:
                field_name = self.reasoning_mode
                events.extend(
                    chunk(i, {field_name: p}, logprobs=piece_logprobs(p))
                    for p in _pieces(c.reasoning, size)
                )
            if c.content:
                events.extend(
                    chunk(i, {"content": p}, logprobs=piece_logprobs(p))
                    for p in _pieces(c.content, size)
                )
            if c.tool_calls:
                calls = [{"index": k, **call} for k, call in enumerate(c.tool_calls)]
                events.append(chunk(i, {"tool_calls": calls}))
            events.append(chunk(i, {}, c.finish_reason, c.tokens if continuous else None))
            return events

        tasks = [asyncio.ensure_future(self._reply(base, i, limit)) for i in range(n)]
        index_of: dict[asyncio.Future[_Choice], int] = {t: i for i, t in enumerate(tasks)}
        response: web.StreamResponse | None = None
        completion_tokens = 0
        try:
            pending: set[asyncio.Future[_Choice]] = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                events: list[bytes] = []
                failed: BaseException | None = None
                for task in sorted(done, key=index_of.__getitem__):
                    if task.exception() is not None:
                        failed = failed or task.exception()
                        continue
                    c = task.result()
                    completion_tokens += c.tokens
                    events.extend(events_of(index_of[task], c))
                if failed is not None and response is None:
                    # Nothing sent yet: a broken responder is a test bug, surfaced as a 500.
                    self._log(body, headers, 500)
                    what = f"{type(failed).__name__}: {failed}"
                    return self._error(500, f"responder raised {what}")
                if response is None:
                    self._log(body, headers, 200)
                    response = web.StreamResponse(
                        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
                    )
                    await response.prepare(request)
                if failed is not None:
                    error = {
                        "message": f"responder raised {type(failed).__name__}: {failed}",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                    events.append(b"data: " + _dumps({"error": error}) + b"\n\n")
                    events.append(b"data: [DONE]\n\n")
                    await self._write(response, events)
                    await response.write_eof()
                    return response
                await self._write(response, events)
        except ConnectionResetError:
            return response or web.Response(status=499)  # the client went away: that's all
        finally:
            for task in tasks:
                task.cancel()
        assert response is not None  # n >= 1, so at least one round of the loop ran
        tail: list[bytes] = []
        if include_usage:
            usage = {
                "prompt_tokens": prompt_count,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_count + completion_tokens,
            }
            tail.append(b"data: " + _dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
        tail.append(b"data: [DONE]\n\n")
        try:
            await self._write(response, tail)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away before the end: nothing to tell it
        return response

    async def _write(self, response: web.StreamResponse, events: list[bytes]) -> None:
        if self.stream_chunk_delay > 0:
            for event in events:
                await response.write(event)
                await asyncio.sleep(self.stream_chunk_delay)
        elif events:
            await response.write(b"".join(events))


def _replace_index(base: ScriptedRequest, index: int) -> ScriptedRequest:
    return ScriptedRequest(
        messages=base.messages,
        last_user=base.last_user,
        sample_index=index,
        model=base.model,
        params=base.params,
        headers=base.headers,
        attempt=base.attempt,
    )


def _choice_words(choice: _Choice) -> list[str]:
    """The words a choice was counted as (its 'tokens'), reasoning first."""
    return ((choice.reasoning or "") + " " + (choice.content or "")).split()[: choice.tokens]


def _token_ids(choice: _Choice) -> list[int]:
    """vLLM's ``return_token_ids``: one stable id per counted word."""
    return [
        int(hashlib.sha256(w.encode()).hexdigest()[:6], 16) % 50_000 for w in _choice_words(choice)
    ]


def _logprobs(choice: _Choice, top_k: int) -> dict[str, Any]:
    """OpenAI-style ``logprobs.content``: one entry per counted word, by the reply's confidence."""
    return {"content": logprob_entries(_choice_words(choice), choice.confidence, top_k)}


def _tool_call_dict(call: ScriptedToolCall, position: int) -> dict[str, Any]:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    call_id = call.id or f"call_{_stable_hex(call.name, arguments, position, size=6)}"
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


# ---------------------------------------------------------------------- command line


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = server_arg_parser(
        "python -m pacore_graph.testing.scripted_server",
        "Scripted OpenAI-compatible chat server; prints 'READY <base_url>'.",
        model="scripted",
    )
    parser.add_argument("--reasoning-mode", choices=_REASONING_MODES, default="reasoning")
    parser.add_argument(
        "--reasoning-words", type=int, default=6, help="length of the default responder's reasoning"
    )
    parser.add_argument(
        "--responder",
        choices=("default", "oracle"),
        default="default",
        help="default: a hash of the input; oracle: answers easy-arithmetic questions with the "
        "stated accuracy and synthesis skill of pacore_graph.testing.method_oracle",
    )
    parser.add_argument(
        "--oracle-accuracy",
        type=float,
        default=0.35,
        help="with --responder oracle: a first-round sample's mean chance of being right",
    )
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--latency-jitter", type=float, default=0.0)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    parser.add_argument("--failure-status", type=int, default=500)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--failure-mode", choices=_FAILURE_MODES, default="status")
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    respond: RespondFn
    if args.responder == "oracle":
        from pacore_graph.testing.method_oracle import MethodOracle

        respond = MethodOracle(accuracy=args.oracle_accuracy)
    else:
        respond = functools.partial(default_respond, reasoning_words=args.reasoning_words)
    server = ScriptedServer(
        respond,
        model=args.model,
        host=args.host,
        port=args.port,
        reasoning_mode=args.reasoning_mode,
        latency=args.latency,
        latency_jitter=args.latency_jitter,
        failure_rate=args.failure_rate,
        failure_status=args.failure_status,
        fail_first=args.fail_first,
        failure_mode=args.failure_mode,
        log_requests=False,  # nobody can read the log of a separate process
        backlog=args.backlog,
    )
    await serve_until_signalled(server)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pacore_graph.testing.scripted_server``."""
    asyncio.run(_serve(_parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
