"""Server-Sent Events in OpenAI's ``chat.completion.chunk`` format, and the wire seam.

While the rounds run, their progress goes out as ``reasoning_content``
deltas (reasoning-model clients show it as thinking); then the answer goes
out as ``content`` deltas, and ``stream_options.include_usage`` adds a last
chunk with the run's usage before ``data: [DONE]``.

:class:`ProgressTranslator` reads the graph's ``astream`` items. It takes the
graph's custom progress events (``round_started``, ``explorer_finished``,
``round_compacted``) and its ``messages`` token chunks of the final round
when the graph emits them, and otherwise derives the same progress from the
node updates (``round``, ``explore``, ``compact``, ``finalize``), so the
server works with graphs that do not emit custom events. When the final
round's tokens were not streamed, the answer is sent as one ``content``
delta once the run is done. A method whose answer is a vote (RSA, DeepConf,
majority: ``synthesis=False``) has no synthesis round: every round's
explorers are reported, no round's tokens are streamed, and the chosen
answer goes out as that one delta. A leading ``<think>...</think>`` in the
streamed content (an upstream without a reasoning parser) goes out as
reasoning, so the streamed ``content`` equals the non-streamed answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pacore_graph.serve.errors import error_body
from pacore_graph.serve.protocol import usage_body
from pacore_graph.values.records import PaCoReResult, Trajectory

__all__ = [
    "ChatStreamWire",
    "ProgressTranslator",
    "StreamChunks",
    "StreamWire",
    "ThinkSplitter",
    "sse",
    "sse_done",
]


def sse(data: Mapping[str, Any]) -> bytes:
    """One SSE event: ``data: {...}`` and a blank line."""
    return (
        b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
    )


def sse_done() -> bytes:
    return b"data: [DONE]\n\n"


@dataclass(slots=True)
class StreamChunks:
    """Builds the chunks of one streamed completion (shared id, created, model)."""

    id: str
    model: str
    created: int = field(default_factory=lambda: int(time.time()))

    def chunk(self, delta: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    def usage(self, usage: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": dict(usage),
        }


class StreamWire(Protocol):
    """One protocol's events for a streamed run: the pump calls these in order.

    ``opening`` once, ``delta`` for each ``{"reasoning_content": ...}`` or
    ``{"content": ...}`` the :class:`ProgressTranslator` yields, then either
    ``closing`` (the run's record; ``streamed_content`` says whether the answer
    already went out as content deltas) or ``failure`` (a public message only).
    """

    def opening(self) -> Iterator[bytes]: ...

    def delta(self, delta: Mapping[str, Any]) -> Iterator[bytes]: ...

    def failure(self, status: int, message: str, code: str | None) -> Iterator[bytes]: ...

    def closing(self, result: PaCoReResult, streamed_content: bool) -> Iterator[bytes]: ...


@dataclass(slots=True)
class ChatStreamWire:
    """OpenAI's ``chat.completion.chunk`` events, ending with ``data: [DONE]``."""

    chunks: StreamChunks
    include_usage: bool = False

    def opening(self) -> Iterator[bytes]:
        yield sse(self.chunks.chunk({"role": "assistant", "content": ""}))

    def delta(self, delta: Mapping[str, Any]) -> Iterator[bytes]:
        yield sse(self.chunks.chunk(delta))

    def failure(self, status: int, message: str, code: str | None) -> Iterator[bytes]:
        yield sse(error_body(status, message, code=code))
        yield sse_done()

    def closing(self, result: PaCoReResult, streamed_content: bool) -> Iterator[bytes]:
        if not streamed_content:
            yield sse(self.chunks.chunk({"content": result.answer}))
        yield sse(self.chunks.chunk({}, finish_reason=result.final.finish_reason or "stop"))
        if self.include_usage:
            yield sse(self.chunks.usage(usage_body(result)))
        yield sse_done()


_OPEN, _CLOSE = "<think>", "</think>"


def _held_back(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could begin ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


@dataclass(slots=True)
class ThinkSplitter:
    """Routes a leading ``<think>...</think>`` of streamed content to reasoning.

    Without a reasoning parser on the upstream, a reasoning model's thinking
    arrives inline in ``content``; the non-streamed answer (the compacted
    message) leaves it out, so the streamed ``content`` must too. Tags split
    across deltas are held back until they can be told apart from text.
    """

    mode: str = "start"
    buffer: str = ""

    def feed(self, text: str) -> Iterator[dict[str, Any]]:
        self.buffer += text
        while True:
            if self.mode == "start":
                head = self.buffer.lstrip()
                if not head or (_OPEN.startswith(head) and head != _OPEN):
                    return  # not yet known whether this is the tag
                if head.startswith(_OPEN):
                    self.mode, self.buffer = "think", head[len(_OPEN) :]
                else:
                    self.mode = "answer"
                continue
            if self.mode == "think":
                end = self.buffer.find(_CLOSE)
                if end < 0:
                    keep = _held_back(self.buffer, _CLOSE)
                    out, self.buffer = (
                        self.buffer[: len(self.buffer) - keep],
                        self.buffer[len(self.buffer) - keep :],
                    )
                    if out:
                        yield {"reasoning_content": out}
                    return
                if end:
                    yield {"reasoning_content": self.buffer[:end]}
                # The rest, blank lines included, is what the compacted answer holds.
                self.mode, self.buffer = "answer", self.buffer[end + len(_CLOSE) :]
                continue
            if self.buffer:
                yield {"content": self.buffer}
                self.buffer = ""
            return

    def flush(self) -> Iterator[dict[str, Any]]:
        rest, self.buffer = self.buffer, ""
        if rest and self.mode == "think":
            yield {"reasoning_content": rest}
        elif rest:
            yield {"content": rest}


@dataclass(slots=True)
class ProgressTranslator:
    """Turns ``graph.astream(..., stream_mode=[...])`` items into delta dicts.

    Feed each ``(mode, payload)`` item to :meth:`feed`; it yields deltas
    (``{"reasoning_content": ...}`` or ``{"content": ...}``). ``result`` is the
    run's record once the ``finalize`` update has gone by. ``schedule`` is the
    run's planned widths; ``synthesis`` says its last round writes the answer
    (PaCoRe's K=1 round) rather than an aggregator choosing it.
    """

    schedule: tuple[int, ...]
    synthesis: bool = True
    result: PaCoReResult | None = None
    streamed_content: bool = False
    _custom: bool = False
    _round: int = -1
    _width: int = 0
    _done_in_round: int = 0
    _think: ThinkSplitter = field(default_factory=lambda: ThinkSplitter())

    @property
    def final_round(self) -> int | None:
        """The synthesis round's index (its tokens are the answer); None for a voted answer."""
        return len(self.schedule) - 1 if self.synthesis else None

    def feed(self, mode: str, payload: Any) -> Iterator[dict[str, Any]]:
        if mode == "custom" and isinstance(payload, Mapping) and "event" in payload:
            self._custom = True
            yield from self._event(payload)
        elif mode == "messages":
            yield from self._token(payload)
        elif mode == "updates" and isinstance(payload, Mapping):
            for node, update in payload.items():
                if isinstance(update, Mapping):
                    yield from self._update(str(node), update)

    # -- custom events (the graph's own progress) --------------------------------

    def _event(self, event: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        kind = event.get("event")
        if kind == "round_started":
            width = event.get("width")
            yield from self._round_started(
                int(event.get("round", self._round + 1)),
                width if isinstance(width, int) and not isinstance(width, bool) else None,
            )
        elif kind == "explorer_finished":
            yield from self._explorer_finished(
                int(event.get("round", self._round)),
                int(event.get("index", 0)),
                int(event.get("completion_tokens") or 0),
                event.get("error"),
            )
        elif kind == "round_compacted":
            yield from self._compacted(
                int(event.get("round", self._round)),
                int(event.get("messages") or 0),
                int(event.get("failures") or 0),
                int(event.get("completion_tokens") or 0),
            )

    def _token(self, payload: Any) -> Iterator[dict[str, Any]]:
        if self._round != self.final_round:
            return
        try:
            message, _metadata = payload
        except (TypeError, ValueError):
            return
        content = getattr(message, "content", None)
        extra = getattr(message, "additional_kwargs", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            yield {"reasoning_content": reasoning}
        if isinstance(content, str) and content:
            yield from self._content(self._think.feed(content))

    def _content(self, deltas: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for delta in deltas:
            if "content" in delta:
                self.streamed_content = True
            yield delta

    def finish(self) -> Iterator[dict[str, Any]]:
        """Whatever the final round's text still holds back (a possible tag's start)."""
        yield from self._content(self._think.flush())

    # -- node updates (any graph built by build_pacore_graph) ---------------------

    def _update(self, node: str, update: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        result = update.get("result")
        if isinstance(result, PaCoReResult):
            self.result = result
            return
        if self._custom:
            return
        if node == "round":
            yield from self._round_started(self._round + 1)
        elif node == "explore":
            for t in update.get("pending") or ():
                if isinstance(t, Trajectory):
                    yield from self._explorer_finished(
                        t.round, t.index, t.completion_tokens, t.error
                    )
        elif node == "compact":
            rounds = update.get("rounds") or ()
            if rounds:
                last = rounds[-1]
                yield from self._compacted(
                    len(rounds) - 1,
                    sum(1 for t in last if not t.failed),
                    sum(1 for t in last if t.failed),
                    sum(t.completion_tokens for t in last),
                )

    # -- the text clients see ----------------------------------------------------

    def _round_started(self, r: int, width: int | None = None) -> Iterator[dict[str, Any]]:
        """A round's header; ``width`` is the event's (a token budget may shrink a round)."""
        total = len(self.schedule)
        if width is None:
            width = self.schedule[r] if 0 <= r < total else 0
        self._round, self._width, self._done_in_round = r, width, 0
        if r == self.final_round:
            text = f"Round {r + 1}/{total}: synthesising the answer.\n"
        else:
            text = f"Round {r + 1}/{total}: {width} parallel explorers.\n"
        yield {"reasoning_content": text}

    def _explorer_finished(
        self, r: int, index: int, tokens: int, error: Any
    ) -> Iterator[dict[str, Any]]:
        if r == self.final_round:
            return
        self._done_in_round += 1
        if r == self._round:
            width = self._width
        else:
            width = self.schedule[r] if 0 <= r < len(self.schedule) else 0
        # The error text may name the upstream's URL or quote its body: never sent.
        status = "failed" if error else f"{tokens} tokens"
        yield {
            "reasoning_content": (
                f"  explorer {index + 1} done [{self._done_in_round}/{width}]: {status}\n"
            )
        }

    def _compacted(
        self, r: int, messages: int, failures: int, tokens: int
    ) -> Iterator[dict[str, Any]]:
        if r == self.final_round:
            return
        voted = not self.synthesis and r == len(self.schedule) - 1
        kept = "answers to vote on" if voted else "messages for the next round"
        text = f"Round {r + 1} done: {messages} {kept}, {failures} failed, {tokens} tokens.\n"
        yield {"reasoning_content": text}
