"""A hostile OpenAI-compatible upstream: answers that are huge, slow or of the wrong shape.

Why: the client must survive an upstream that misbehaves (a bug, a broken
proxy, a compromised server) without a traceback, without unbounded memory
and without holding a run far past its deadline. These answers are hard to
build with a responder (they are not chat replies at all), so this server
writes them byte by byte over real HTTP.

The attack is chosen BY INPUT: a marker ``HOSTILE:<attack>`` anywhere in the
last user message (a run's problem text carries it into every round), or
for every request by the ``attack`` option. A request without a marker gets
the ordinary scripted reply (:class:`~pacore_graph.testing.ScriptedServer`).
See :data:`ATTACKS` for the list; ``size`` is the byte count of the huge
ones, ``drip_interval`` the pause between the bytes of the slow ones.
``truncated_body`` declares ``size`` bytes of answer and hangs up halfway.
``model_names`` makes ``GET /v1/models`` list that many names (its own
model's first), written as they are made, so a list of millions costs this
server no memory.

Run it alone: ``python -m pacore_graph.testing.hostile_upstream --port 0
[--attack huge_body] [--size 200000000] [--model-names 5000000]`` prints
``READY <base_url>``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from pacore_graph.testing.loopback_server import serve_until_signalled, server_arg_parser
from pacore_graph.testing.scripted_server import ScriptedServer, last_user_text

__all__ = [
    "ATTACKS",
    "MALFORMED_ATTACKS",
    "MALFORMED_EVENT_ATTACKS",
    "HostileServer",
    "main",
    "marker",
]

_CHUNK = 1 << 20
_NAMES_PER_BLOCK = 10_000
_MARKER = re.compile(r"HOSTILE:([a-z_]+)(@odd)?")


def marker(attack: str, *, odd_seeds_only: bool = False) -> str:
    """The text that, in a prompt, makes the server answer with ``attack``.

    ``odd_seeds_only``: only requests whose ``seed`` is odd are attacked, the
    others answered normally (one request per explorer, ``--no-batch``, then
    fails every other explorer of a round and the run goes on).
    """
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}; known: {', '.join(sorted(ATTACKS))}")
    return f"HOSTILE:{attack}" + ("@odd" if odd_seeds_only else "")


def _choice(index: Any, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {"index": index, "message": message, "finish_reason": "stop", **extra}


def _answer(n: int, **fields: Any) -> dict[str, Any]:
    """A well-formed answer with ``n`` choices, some fields replaced."""
    body: dict[str, Any] = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion",
        "model": "hostile",
        "choices": [_choice(i) for i in range(n)],
        "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n},
    }
    body.update(fields)
    return body


def _usage(value: Any) -> Callable[[int], Any]:
    return lambda n: _answer(n, usage={"prompt_tokens": 3, "completion_tokens": value})


#: JSON answers of the wrong shape, by attack name: each a function of ``n``.
_MALFORMED: dict[str, Callable[[int], Any]] = {
    "choices_not_list": lambda n: _answer(n, choices={"0": _choice(0)}),
    "choice_not_object": lambda n: _answer(n, choices=["hello"] * n),
    "message_not_object": lambda n: _answer(
        n, choices=[{"index": i, "message": ["x"], "finish_reason": "stop"} for i in range(n)]
    ),
    "index_string": lambda n: _answer(n, choices=[_choice("0")]),
    "index_null": lambda n: _answer(n, choices=[_choice(None)]),
    "index_out_of_range": lambda n: _answer(n, choices=[_choice(n + 5)]),
    "index_duplicate": lambda n: _answer(n, choices=[_choice(0), _choice(0)]),
    "content_not_string": lambda n: _answer(n, choices=[_choice(i, {"a": 1}) for i in range(n)]),
    "usage_infinity": _usage(float("inf")),
    "usage_string": _usage("lots"),
    "usage_list": _usage([1, 2]),
    "usage_negative": _usage(-1_999_999_999),
    "usage_huge": _usage(10**30),
    "too_many_choices": lambda n: _answer(
        10 * n, usage={"prompt_tokens": 3, "completion_tokens": 400 * n}
    ),
    "json_array": lambda n: [1, 2, 3],
    "error_object": lambda n: {"error": {"message": "line one\nline two", "code": 500}},
}

#: Streamed events of the wrong shape (sent as ``data:`` lines, then ``[DONE]``).
_MALFORMED_EVENTS: dict[str, Callable[[int], Any]] = {
    "sse_index_string": lambda n: {"choices": [{"index": "x", "delta": {"content": "a"}}]},
    "sse_delta_not_object": lambda n: {"choices": [{"index": 0, "delta": "a"}]},
    "sse_content_not_string": lambda n: {"choices": [{"index": 0, "delta": {"content": 7}}]},
    "sse_usage_negative": lambda n: {
        "choices": [],
        "usage": {"prompt_tokens": -5, "completion_tokens": -1_999_999_999},
    },
    "sse_index_out_of_range": lambda n: {
        "choices": [{"index": n + 3, "delta": {"content": "a"}, "finish_reason": "stop"}]
    },
}

#: The JSON answers of the wrong shape, and the malformed streamed events.
MALFORMED_ATTACKS: frozenset[str] = frozenset(_MALFORMED)
MALFORMED_EVENT_ATTACKS: frozenset[str] = frozenset(_MALFORMED_EVENTS)

#: Every attack this server knows.
ATTACKS: frozenset[str] = frozenset(
    {
        "huge_body",
        "huge_declared",
        "truncated_body",
        "huge_error",
        "gzip_bomb",
        "slow_body",
        "not_json",
        "sse_huge_line",
        "sse_endless",
        "sse_slow",
        *_MALFORMED,
        *_MALFORMED_EVENTS,
    }
)


class HostileServer(ScriptedServer):
    """A :class:`ScriptedServer` that answers marked requests with an attack (module doc)."""

    def __init__(
        self,
        *,
        attack: str | None = None,
        size: int = 200_000_000,
        drip_interval: float = 1.0,
        model_names: int = 0,
        **kwargs: Any,
    ) -> None:
        if attack is not None and attack not in ATTACKS:
            raise ValueError(f"unknown attack {attack!r}")
        if size < 1 or drip_interval < 0 or model_names < 0:
            raise ValueError("size must be >= 1, drip_interval and model_names >= 0")
        kwargs.setdefault("shutdown_timeout", 0.2)
        super().__init__(**kwargs)
        self.attack = attack
        self.size = size
        self.drip_interval = drip_interval
        self.model_names = model_names
        self.models_requests = 0
        """How many times ``GET /v1/models`` was asked."""
        self.models_completed = 0
        """How many huge model lists were written to their end (the client read on)."""
        self.attacks_sent: dict[str, int] = {}
        """How many times each attack was answered (tests check the client's retries)."""
        self.completed: dict[str, int] = {}
        """How many of the streamed attacks were written to their end (the client read on)."""

    def _attack_of(self, body: Any) -> str | None:
        messages = body.get("messages") if isinstance(body, dict) else None
        found = _MARKER.search(last_user_text(messages)) if isinstance(messages, list) else None
        if found and found.group(1) in ATTACKS:
            seed = body.get("seed")
            if found.group(2) and not (isinstance(seed, int) and seed % 2 == 1):
                return None
            return found.group(1)
        return self.attack

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.models_requests += 1
        if not self.model_names:
            return await super()._models(request)
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        try:
            await response.write(
                b'{"object":"list","data":[{"id":%s}' % json.dumps(self.model).encode()
            )
            # Built once and numbered per block (one C-level replace), so a list of
            # millions goes out as fast as the socket takes it, as a real server's would.
            block = b"".join(b',{"id":"model-#####%04d"}' % i for i in range(_NAMES_PER_BLOCK))
            left = self.model_names - 1
            for number in itertools.count():
                if left <= 0:
                    break
                names = block.replace(b"#####", b"%05d" % number)
                if left < _NAMES_PER_BLOCK:
                    names = names[: left * len(b',{"id":"model-000000000"}')]
                await response.write(names)
                left -= _NAMES_PER_BLOCK
            await response.write(b"]}")
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            return response  # the client stopped reading: the point of a huge list
        self.models_completed += 1
        return response

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        attack = self._attack_of(body)
        if attack is None:
            return await super()._chat(request)
        self.request_count += 1
        self.attacks_sent[attack] = self.attacks_sent.get(attack, 0) + 1
        n = body.get("n") if isinstance(body, dict) else None
        n = n if isinstance(n, int) and 1 <= n <= 1000 else 1
        try:
            response = await self._answer(request, attack, n)
        except (ConnectionResetError, ConnectionError):
            return web.Response(status=499)  # the client hung up: that is the point
        if response.prepared:  # written to the end: the client read it all
            self.completed[attack] = self.completed.get(attack, 0) + 1
        return response

    async def _answer(self, request: web.Request, attack: str, n: int) -> web.StreamResponse:
        if attack in _MALFORMED:
            text = json.dumps(_MALFORMED[attack](n))  # allow_nan: Infinity goes out as is
            return web.Response(text=text, content_type="application/json")
        if attack in _MALFORMED_EVENTS:
            line = json.dumps(_MALFORMED_EVENTS[attack](n))
            return await self._send(request, [f"data: {line}\n\ndata: [DONE]\n\n".encode()])
        if attack == "not_json":
            return web.Response(text="<html>\n<b>502 Bad Gateway</b>\n</html>", status=200)
        head = b'{"choices":[{"index":0,"finish_reason":"stop","message":{"content":"'
        tail = b'"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}'
        if attack == "huge_body":
            return await self._send(request, [head, *self._filler(), tail])
        if attack == "truncated_body":
            response = web.StreamResponse()
            response.content_type = "application/json"
            response.content_length = len(head) + self.size + len(tail)
            await response.prepare(request)
            await response.write(head)
            left = self.size // 2
            for part in self._filler():
                if left <= 0:
                    break
                await response.write(part[:left])
                left -= len(part)
            assert request.transport is not None
            request.transport.close()  # hang up with half the declared length unsent
            return response
        if attack == "huge_declared":
            return await self._send(
                request, [head, *self._filler(), tail], length=len(head) + self.size + len(tail)
            )
        if attack == "gzip_bomb":
            packed = _gzipped([head, *self._filler(), tail])
            return await self._send(request, packed, encoding="gzip")
        if attack == "huge_error":
            return await self._send(request, [b"oops ", *self._filler()], status=500)
        if attack == "slow_body":
            return await self._send(request, [head, b"slow", tail], drip=True)
        if attack == "sse_huge_line":
            return await self._send(
                request, [b'data: {"choices":[{"index":0,"delta":{"content":"', *self._filler()]
            )
        if attack == "sse_slow":
            done = b'{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}'
            return await self._send(
                request, [b"data: " + done + b"\n\ndata: [DONE]\n\n"], drip=True
            )
        assert attack == "sse_endless"
        event = b'data: {"choices":[{"index":0,"delta":{"content":"aaaaaaaaaaaaaaaa"}}]}\n\n'
        block = event * (_CHUNK // len(event))
        return await self._send(request, [block] * (self.size // len(block) + 1))

    def _filler(self) -> list[bytes]:
        """``size`` bytes of ``a`` in chunks (the same chunk object: no memory here)."""
        full, rest = divmod(self.size, _CHUNK)
        chunk = b"a" * _CHUNK
        return [chunk] * full + ([b"a" * rest] if rest else [])

    async def _send(
        self,
        request: web.Request,
        parts: Sequence[bytes],
        *,
        status: int = 200,
        length: int | None = None,
        drip: bool = False,
        encoding: str | None = None,
    ) -> web.StreamResponse:
        """Write ``parts`` (one byte per ``drip_interval`` when ``drip``)."""
        streamed = any(p.startswith(b"data:") for p in parts[:1])
        response = web.StreamResponse(status=status)
        response.content_type = "text/event-stream" if streamed else "application/json"
        if encoding is not None:
            response.headers["Content-Encoding"] = encoding
        if length is not None:
            response.content_length = length
        await response.prepare(request)
        for part in parts:
            if drip:
                for i in range(len(part)):
                    await response.write(part[i : i + 1])
                    await asyncio.sleep(self.drip_interval)
            else:
                await response.write(part)
        await response.write_eof()
        return response


def _gzipped(parts: Sequence[bytes]) -> list[bytes]:
    """``parts`` as one gzip stream (about 1,000x smaller than what it unpacks to)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [packer.compress(part) for part in parts]
    out.append(packer.flush())
    return [p for p in out if p]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = server_arg_parser(
        "python -m pacore_graph.testing.hostile_upstream",
        "Hostile OpenAI-compatible chat server (huge, slow, malformed answers); "
        "prints 'READY <base_url>'.",
        model="scripted",
    )
    parser.add_argument("--attack", choices=sorted(ATTACKS), help="answer every request so")
    parser.add_argument("--size", type=int, default=200_000_000, help="bytes of a huge answer")
    parser.add_argument("--drip-interval", type=float, default=1.0, help="seconds per slow byte")
    parser.add_argument(
        "--model-names", type=int, default=0, help="names GET /v1/models lists (0: one)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pacore_graph.testing.hostile_upstream``."""
    args = _parse_args(argv)
    server = HostileServer(
        attack=args.attack,
        size=args.size,
        drip_interval=args.drip_interval,
        model_names=args.model_names,
        model=args.model,
        host=args.host,
        port=args.port,
        log_requests=False,
        backlog=args.backlog,
    )
    asyncio.run(serve_until_signalled(server))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
