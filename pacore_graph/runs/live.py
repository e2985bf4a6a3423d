"""``pacore run "question"`` live: round progress on stderr, the answer's tokens on stdout.

A PaCoRe run on a small local model takes tens of seconds; a silent terminal
for that long looks hung. This module drives the graph with
``astream(stream_mode=["custom", "messages", "values"])`` (see
:mod:`pacore_graph.graph.streaming` for what each mode carries) and shows:

- on stderr, one line per round as it starts and as it is compacted, and
  (on a terminal) a counter of the round's finished explorers;
- on stdout, when it is a terminal, the final round's tokens as they arrive.

When stdout is not a terminal (a pipe, a file) nothing streams: the caller
prints the answer once, as before, so scripts see the same output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from langchain_core.messages import AIMessageChunk

from pacore_graph.graph.records import PaCoReResult

__all__ = ["LiveRun", "run_live"]


class LiveRun:
    """Renders one run's stream events; ``streamed`` says whether the answer was printed."""

    def __init__(self, err: IO[str] | None, out: IO[str] | None) -> None:
        self.err = err
        self.out = out
        self.streamed = False
        self._done = 0
        self._width = 0
        self._rounds = 0
        self._counter = bool(err is not None and err.isatty())

    def progress(self, event: Mapping[str, Any]) -> None:
        if self.err is None:
            return
        kind = event.get("event")
        if kind == "round_started":
            self._done, self._width = 0, int(event["width"])
            self._line(f"round {event['round'] + 1}: {self._width} explorer(s) started")
        elif kind == "explorer_finished":
            self._done += 1
            if self._counter:
                self.err.write(f"\r  {self._done}/{self._width} done")
                self.err.flush()
        elif kind == "round_compacted":
            failures = f", {event['failures']} failed" if event["failures"] else ""
            self._line(
                f"round {event['round'] + 1}: {event['messages']} message(s) kept{failures}, "
                f"{event['completion_tokens']} tokens"
            )

    def token(self, chunk: AIMessageChunk) -> None:
        if self.out is None or not isinstance(chunk.content, str) or not chunk.content:
            return
        self.streamed = True
        self.out.write(chunk.content)
        self.out.flush()

    def _line(self, text: str) -> None:
        assert self.err is not None
        prefix = "\r\x1b[K" if self._counter else ""
        self.err.write(f"{prefix}{text}\n")
        self.err.flush()


async def run_live(
    graph: Any,
    question: str,
    *,
    err: IO[str] | None,
    out: IO[str] | None,
) -> tuple[PaCoReResult, bool]:
    """Run one question with live output; returns the result and whether its tokens streamed.

    ``err=None`` hides progress; ``out=None`` turns token streaming off (the
    final call then goes out as an ordinary request).
    """
    live = LiveRun(err, out)
    modes = ["custom", "values"] + (["messages"] if out is not None else [])
    final: Mapping[str, Any] = {}
    async for mode, data in graph.astream(
        {"messages": [{"role": "user", "content": question}]}, stream_mode=modes
    ):
        if mode == "custom" and isinstance(data, Mapping):
            live.progress(data)
        elif mode == "messages":
            message, _meta = data
            if isinstance(message, AIMessageChunk):
                live.token(message)
        elif mode == "values":
            final = data
    if live.streamed and out is not None:
        out.write("\n")
        out.flush()
    result = final.get("result")
    if not isinstance(result, PaCoReResult):
        raise RuntimeError("the graph finished without a result")
    return result, live.streamed
