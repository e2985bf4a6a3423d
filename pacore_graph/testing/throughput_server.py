"""A throughput-bound OpenAI-compatible chat server: vLLM's timing without a model.

Why: a fixed per-request latency (the scripted server's ``--latency``) hides
what limits a real run. A batching server such as vLLM shares its decode
throughput among the sequences in flight (processor sharing, see
:mod:`pacore_graph.testing.processor_sharing`), and reasoning lengths are
heavy-tailed, so a PaCoRe round waits for its longest trajectory. A run's
physical limit is then ``tokens generated / throughput``, and an orchestrator
gets close to it only by keeping the server busy across problems and rounds.

Each choice of a request is one sequence. Its length is lognormal
(``median`` and ``sigma``), fixed by the request's ``seed`` and the choice
index when a seed is sent, else by a stable hash of the prompt and the
sample's position among all unseeded samples of that same prompt so far (so
``n=K`` in one request and K requests with ``n=1`` draw the same K lengths,
as K samples from a real server would differ); runs are reproducible.
``max_tokens`` truncates a length (finish reason ``length``). A JSON response
is sent when all its ``n`` choices are done; a streamed one (``"stream":
true``) sends each choice whole the moment it is done, as SSE chunks shaped
like vLLM's (``continuous_usage_stats`` honoured). A client that disconnects cancels
its sequences (the tokens they got still count). Prefill is free: the model
is decode-bound.

Texts come from a responder (the scripted server's :func:`default_respond` by
default) padded with filler reasoning to the drawn length; tokens are
whitespace-separated words, as in the scripted server.

``GET /stats`` reports ``tokens_generated`` and friends (``choices_cancelled``:
streamed choices whose client hung up before their end); ``POST /stats/reset``
zeroes them.

Log-probabilities (``"logprobs": true``, ``top_logprobs``) are deterministic
by input (:mod:`pacore_graph.testing.logprobs`; the responder's
``ScriptedReply.confidence`` covers the padding too), in JSON and in streams.
With ``stream_chunk_tokens`` a streamed choice is sent as it is decoded, that
many tokens per event (each chunk a slice of the sequence's decode, so the
timing is the same), as vLLM streams; a client can then judge a choice
while it runs and cancel it (online DeepConf). Without it a streamed choice
is sent whole when done.

Run it in its own process for benchmarks:
``python -m pacore_graph.testing.throughput_server --throughput 50000``
prints ``READY http://127.0.0.1:PORT/v1``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import itertools
import json
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from pacore_graph.testing.logprobs import Confidence, logprob_entries, requested_top_logprobs
from pacore_graph.testing.loopback_server import (
    LoopbackServer,
    serve_until_signalled,
    server_arg_parser,
)
from pacore_graph.testing.processor_sharing import ProcessorSharing
from pacore_graph.testing.scripted_server import (
    ScriptedReply,
    ScriptedRequest,
    default_respond,
    last_user_text,
    prompt_tokens,
)

__all__ = [
    "LengthModel",
    "ThroughputServer",
    "main",
]

Respond = Callable[[ScriptedRequest], "ScriptedReply | str | Awaitable[ScriptedReply | str]"]
_FILLER = "thinking"


@dataclass(frozen=True, slots=True)
class LengthModel:
    """Lognormal completion lengths, fixed by (seed, choice) or (prompt, choice)."""

    median: float = 60.0
    sigma: float = 1.0
    max_length: int = 32768

    def __post_init__(self) -> None:
        if self.median <= 0 or self.sigma < 0 or self.max_length < 1:
            raise ValueError("median must be > 0, sigma >= 0 and max_length >= 1")

    def length(self, seed: int | None, sample_index: int, prompt: str) -> int:
        """The natural length of one choice (before ``max_tokens``)."""
        key = f"seed\x1f{seed}\x1f{sample_index}" if seed is not None else f"p\x1f{prompt}"
        if seed is None:
            key += f"\x1f{sample_index}"
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        z = random.Random(int.from_bytes(digest, "big")).gauss(0.0, 1.0)
        drawn = round(self.median * math.exp(self.sigma * z))
        return max(1, min(self.max_length, drawn))


@dataclass(frozen=True, slots=True)
class _Choice:
    content: str
    reasoning: str
    tokens: int
    finish_reason: str
    confidence: Confidence = None

    def words(self) -> list[str]:
        """The choice's tokens (words), reasoning first: exactly ``tokens`` of them."""
        return [*self.reasoning.split(), *self.content.split()][: self.tokens]


def _shape(reply: ScriptedReply, length: int) -> _Choice:
    """Pad or cut a reply to exactly ``length`` words (reasoning first, then content)."""
    content_words = (reply.content or "").split()
    reasoning_words = (reply.reasoning or "").split()
    if length >= len(content_words):
        budget = length - len(content_words)
        reasoning_words = (reasoning_words + [_FILLER] * budget)[:budget]
        return _Choice(
            " ".join(content_words), " ".join(reasoning_words), length, "stop", reply.confidence
        )
    return _Choice(" ".join(content_words[:length]), "", length, "length", reply.confidence)


class _ChunkEvents:
    """The SSE events of one streamed answer: one choice's delta each, usage when asked."""

    __slots__ = ("_head", "_prompt_tokens")

    def __init__(self, *, id: str, model: str, prompt_tokens: int | None) -> None:
        self._head = {
            "id": id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        #: The prompt's tokens when ``continuous_usage_stats`` was asked, else None.
        self._prompt_tokens = prompt_tokens

    def event(
        self,
        index: int,
        delta: dict[str, Any],
        finish: str | None,
        tokens: int,
        logprobs: list[dict[str, Any]] | None = None,
    ) -> bytes:
        lp = None if logprobs is None else {"content": logprobs}
        chunk: dict[str, Any] = {
            **self._head,
            "choices": [{"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}],
        }
        if self._prompt_tokens is not None:
            chunk["usage"] = {
                "prompt_tokens": self._prompt_tokens,
                "completion_tokens": tokens,
                "total_tokens": self._prompt_tokens + tokens,
            }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        """The last event: no choices, the request's usage (``include_usage``)."""
        last = {
            **self._head,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return b"data: " + json.dumps(last).encode() + b"\n\n"


class ThroughputServer(LoopbackServer):
    """The server; ``async with ThroughputServer(...) as srv: srv.base_url``."""

    # a client that goes away cancels its sequences, which is what "cancelled
    # upstream" means for a straggler.
    handler_cancellation = True

    def __init__(
        self,
        respond: Respond = default_respond,
        *,
        throughput: float = 50_000.0,
        per_sequence_cap: float = 2_000.0,
        lengths: LengthModel | None = None,
        model: str = "throughput",
        host: str = "127.0.0.1",
        port: int = 0,
        backlog: int = 4096,
        stream_chunk_tokens: int | None = None,
    ) -> None:
        if stream_chunk_tokens is not None and stream_chunk_tokens < 1:
            raise ValueError("stream_chunk_tokens must be >= 1 (or None: whole choices)")
        super().__init__(host=host, port=port, backlog=backlog)
        self.stream_chunk_tokens = stream_chunk_tokens
        self.respond = respond
        self.lengths = lengths or LengthModel()
        self.model = model
        self._throughput = throughput
        self._cap = per_sequence_cap
        self._sharing: ProcessorSharing | None = None
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._ids = itertools.count(1)
        self._unseeded: dict[bytes, int] = {}
        self.requests = 0
        self.choices_cancelled = 0
        """Streamed choices whose client hung up before they ended (progressive streams)."""
        self.first_request_unix: float | None = None
        self.last_response_unix: float | None = None

    # ------------------------------------------------------------------ lifecycle

    def _add_routes(self, app: web.Application) -> None:
        for prefix in ("", "/v1"):
            app.router.add_get(f"{prefix}/stats", self._stats)
            app.router.add_post(f"{prefix}/stats/reset", self._reset)

    def _on_start(self) -> None:
        loop = asyncio.get_running_loop()
        self._sharing = ProcessorSharing(self._throughput, self._cap, now=loop.time())

    def _on_stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    # ------------------------------------------------------------------ scheduling

    def _share(self) -> ProcessorSharing:
        if self._sharing is None:
            raise RuntimeError("ThroughputServer is not running")
        return self._sharing

    def _reschedule(self) -> None:
        """Wake the sequences that are done and set a timer for the next one."""
        loop = asyncio.get_running_loop()
        sharing = self._share()
        for seq_id in sharing.finish_due(loop.time()):
            waiter = self._waiters.pop(seq_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        when = sharing.next_finish()
        if when is not None:
            self._timer = loop.call_at(when, self._reschedule)

    def _admit(self, lengths: list[int]) -> tuple[list[int], list[asyncio.Future[None]]]:
        """Start decoding sequences of these lengths; a future per sequence says it is done."""
        loop = asyncio.get_running_loop()
        sharing = self._share()
        ids = [sharing.admit(loop.time(), n) for n in lengths]
        waiters: list[asyncio.Future[None]] = [loop.create_future() for _ in ids]
        self._waiters.update(zip(ids, waiters, strict=True))
        self._reschedule()
        return ids, waiters

    def _cancel(self, ids: list[int]) -> None:
        """Stop the sequences of ``ids`` that are still decoding (their client went away)."""
        now = asyncio.get_running_loop().time()
        sharing = self._share()
        for seq_id in ids:
            if self._waiters.pop(seq_id, None) is not None:
                sharing.cancel(now, seq_id)
        self._reschedule()

    async def _decode(self, lengths: list[int]) -> None:
        """Decode sequences of these lengths concurrently with everything else."""
        ids, waiters = self._admit(lengths)
        try:
            await asyncio.gather(*waiters)
        except asyncio.CancelledError:
            self._cancel(ids)
            raise

    # ------------------------------------------------------------------ handlers

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        )

    def stats(self) -> dict[str, Any]:
        """Counters since start or the last reset, as ``GET /stats`` returns them."""
        loop = asyncio.get_running_loop()
        snap = asdict(self._share().stats(loop.time()))
        snap.update(
            requests=self.requests,
            choices_cancelled=self.choices_cancelled,
            throughput=self._throughput,
            per_sequence_cap=self._cap,
            physical_limit_seconds=snap["tokens_generated"] / self._throughput,
            first_request_unix=self.first_request_unix,
            last_response_unix=self.last_response_unix,
        )
        return snap

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _reset(self, request: web.Request) -> web.Response:
        self._share().reset_stats()
        self._unseeded.clear()  # a reset starts a reproducible run afresh
        self.requests = 0
        self.choices_cancelled = 0
        self.first_request_unix = self.last_response_unix = None
        return web.json_response(self.stats())

    @staticmethod
    def _error(status: int, message: str) -> web.Response:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
        return web.json_response(body, status=status)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.first_request_unix is None:
            self.first_request_unix = time.time()
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._error(400, "request body is not valid JSON")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            return self._error(400, "'messages' must be a non-empty list")
        n = body.get("n")
        n = 1 if n is None else n
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            return self._error(400, "'n' must be a positive integer")
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            return self._error(400, "'max_tokens' must be a positive integer")
        seed = body.get("seed") if isinstance(body.get("seed"), int) else None

        last_user = last_user_text(messages)
        prompt = json.dumps(messages, sort_keys=True)
        first_index = 0
        if seed is None:  # the k-th unseeded sample of a prompt draws length k
            key = hashlib.blake2b(prompt.encode(), digest_size=16).digest()
            first_index = self._unseeded.get(key, 0)
            self._unseeded[key] = first_index + n
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
        model = str(body.get("model") or self.model)

        choices: list[_Choice] = []
        for i in range(n):
            req = ScriptedRequest(
                messages=messages, last_user=last_user, sample_index=i, model=model, params=params
            )
            result = self.respond(req)
            if inspect.isawaitable(result):
                result = await result
            reply = ScriptedReply(content=result) if isinstance(result, str) else result
            natural = self.lengths.length(seed, first_index + i, prompt)
            choice = _shape(reply, natural if limit is None else min(natural, limit))
            if limit is not None and natural > limit:
                choice = _Choice(
                    choice.content, choice.reasoning, choice.tokens, "length", choice.confidence
                )
            choices.append(choice)

        prompt_count = prompt_tokens(messages)
        top_k = requested_top_logprobs(body) if body.get("logprobs") else None
        if body.get("stream"):
            options = body.get("stream_options")
            options = options if isinstance(options, dict) else {}
            stream = self._stream if self.stream_chunk_tokens is None else self._stream_progressive
            return await stream(
                request,
                choices,
                model=model,
                prompt_count=prompt_count,
                usage=bool(options.get("include_usage")),
                continuous=bool(options.get("include_usage"))
                and bool(options.get("continuous_usage_stats")),
                top_k=top_k,
            )

        await self._decode([c.tokens for c in choices])

        completion_tokens = sum(c.tokens for c in choices)
        self.last_response_unix = time.time()
        return web.json_response(
            {
                "id": f"chatcmpl-tp{next(self._ids):x}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": i,
                        "message": {
                            "role": "assistant",
                            "content": c.content,
                            "reasoning": c.reasoning or None,
                        },
                        "logprobs": None
                        if top_k is None
                        else {"content": logprob_entries(c.words(), c.confidence, top_k)},
                        "finish_reason": c.finish_reason,
                    }
                    for i, c in enumerate(choices)
                ],
                "usage": {
                    "prompt_tokens": prompt_count,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_count + completion_tokens,
                },
            }
        )

    async def _stream(
        self,
        request: web.Request,
        choices: list[_Choice],
        *,
        model: str,
        prompt_count: int,
        usage: bool,
        continuous: bool,
        top_k: int | None = None,
    ) -> web.StreamResponse:
        """Server-sent events, each choice sent whole the moment its sequence finishes.

        As vLLM does for ``n``: a role chunk per choice first, then per
        choice its reasoning and content deltas and its ``finish_reason``
        (with that choice's running usage when ``continuous_usage_stats`` is
        asked), the request's usage last (``include_usage``), then ``[DONE]``.
        A client that disconnects cancels the sequences still decoding.
        """
        events = _ChunkEvents(
            id=f"chatcmpl-tp{next(self._ids):x}",
            model=model,
            prompt_tokens=prompt_count if continuous else None,
        )
        event = events.event

        ids, waiters = self._admit([c.tokens for c in choices])
        index_of = {waiter: i for i, waiter in enumerate(waiters)}
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)
            await response.write(
                b"".join(
                    event(i, {"role": "assistant", "content": ""}, None, 0)
                    for i in range(len(choices))
                )
            )
            pending = set(waiters)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                out: list[bytes] = []
                for i in sorted(index_of[w] for w in done):
                    c = choices[i]
                    words = c.words()
                    cut = len(c.reasoning.split())
                    entries = None if top_k is None else logprob_entries(words, c.confidence, top_k)
                    if c.reasoning:
                        lp = None if entries is None else entries[:cut]
                        out.append(event(i, {"reasoning": c.reasoning}, None, c.tokens, lp))
                    lp = None if entries is None else entries[cut:]
                    out.append(event(i, {"content": c.content}, None, c.tokens, lp))
                    out.append(event(i, {}, c.finish_reason, c.tokens))
                await response.write(b"".join(out))
            if usage:
                total = sum(c.tokens for c in choices)
                await response.write(events.usage(prompt_count, total))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except BaseException:
            # Disconnected (the handler is cancelled, or a write failed): stop decoding.
            self._cancel(ids)
            raise
        self.last_response_unix = time.time()
        return response

    async def _stream_progressive(
        self,
        request: web.Request,
        choices: list[_Choice],
        *,
        model: str,
        prompt_count: int,
        usage: bool,
        continuous: bool,
        top_k: int | None = None,
    ) -> web.StreamResponse:
        """Server-sent events as the choices decode, ``stream_chunk_tokens`` tokens per event.

        Each choice decodes slice by slice (one processor-sharing sequence
        per slice, back to back: the same share of throughput at every
        moment, so the same timing as one sequence); a slice's words go out
        as soon as it is decoded, with their log-probabilities when asked
        and the choice's running usage under ``continuous_usage_stats``. A
        client that disconnects cancels the slices still decoding (the
        tokens they got count, as for whole choices).
        """
        step = self.stream_chunk_tokens or 1
        events = _ChunkEvents(
            id=f"chatcmpl-tp{next(self._ids):x}",
            model=model,
            prompt_tokens=prompt_count if continuous else None,
        )
        event = events.event

        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        lock = asyncio.Lock()

        async def decode_choice(i: int, c: _Choice) -> None:
            words = c.words()
            cut = len(c.reasoning.split())
            sent = 0
            while sent < c.tokens:
                size = min(step, c.tokens - sent)
                try:
                    await self._decode([size])
                except asyncio.CancelledError:
                    self.choices_cancelled += 1  # hung up mid-slice
                    raise
                out: list[bytes] = []
                lp = (
                    None
                    if top_k is None
                    else logprob_entries(words[sent : sent + size], c.confidence, top_k, start=sent)
                )
                think = words[sent : min(sent + size, cut)]
                said = words[max(sent, cut) : sent + size]
                if think:
                    text = (" " if sent else "") + " ".join(think)
                    out.append(
                        event(
                            i,
                            {"reasoning": text},
                            None,
                            sent + size,
                            None if lp is None else lp[: len(think)],
                        )
                    )
                if said:
                    text = (" " if sent + len(think) > cut else "") + " ".join(said)
                    out.append(
                        event(
                            i,
                            {"content": text},
                            None,
                            sent + size,
                            None if lp is None else lp[len(think) :],
                        )
                    )
                sent += size
                try:
                    async with lock:
                        await response.write(b"".join(out))
                except (asyncio.CancelledError, ConnectionResetError):
                    if sent < c.tokens:
                        self.choices_cancelled += 1  # hung up between slices
                    raise
            async with lock:
                await response.write(event(i, {}, c.finish_reason, c.tokens))

        tasks: list[asyncio.Task[None]] = []
        try:
            await response.prepare(request)
            await response.write(
                b"".join(
                    event(i, {"role": "assistant", "content": ""}, None, 0)
                    for i in range(len(choices))
                )
            )
            tasks = [asyncio.ensure_future(decode_choice(i, c)) for i, c in enumerate(choices)]
            await asyncio.gather(*tasks)
            if usage:
                total = sum(c.tokens for c in choices)
                await response.write(events.usage(prompt_count, total))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except BaseException:
            # Disconnected: the slices still decoding are cancelled (their _decode stops them).
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        self.last_response_unix = time.time()
        return response


# ---------------------------------------------------------------------- command line


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = server_arg_parser(
        "python -m pacore_graph.testing.throughput_server",
        "Throughput-bound OpenAI-compatible chat server; prints 'READY <base_url>'.",
        model="throughput",
    )
    parser.add_argument("--throughput", type=float, default=50_000.0, help="tokens/s in all")
    parser.add_argument("--per-sequence-cap", type=float, default=2_000.0, help="tokens/s each")
    parser.add_argument("--median", type=float, default=60.0, help="median completion tokens")
    parser.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of lengths")
    parser.add_argument("--max-length", type=int, default=32768, help="longest completion")
    parser.add_argument(
        "--stream-chunk-tokens",
        type=int,
        default=None,
        help="stream choices as they decode, this many tokens per event (default: whole choices)",
    )
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    server = ThroughputServer(
        throughput=args.throughput,
        per_sequence_cap=args.per_sequence_cap,
        lengths=LengthModel(median=args.median, sigma=args.sigma, max_length=args.max_length),
        model=args.model,
        host=args.host,
        port=args.port,
        backlog=args.backlog,
        stream_chunk_tokens=args.stream_chunk_tokens,
    )
    await serve_until_signalled(server)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pacore_graph.testing.throughput_server``."""
    try:
        asyncio.run(_serve(_parse_args(argv)))
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
