"""``pacore run "question"`` live: round progress on stderr, the answer's tokens on stdout.

A PaCoRe run on a small local model takes tens of seconds; a silent terminal
for that long looks hung. This module drives the graph with
``astream(stream_mode=["custom", "messages", "values"])`` (see
:mod:`pacore_graph.graph.streaming` for what each mode carries) and shows:

- on stderr, one line per round as it starts and as it is compacted, and
  (on a terminal) a counter of the round's finished explorers with the
  round's elapsed seconds, redrawn every second;
- on stderr that is not a terminal (a pipe, a log), a progress line
  (``round 1: 2/4 explorer(s) done, 10 s``) whenever ``heartbeat`` seconds
  (5) pass without a line: a round of the embedded model on two cores takes
  10-30 s, most of it prompt processing with no sample finished, and a
  silence that long reads as a hang;
- on stdout, when it is a terminal, the final round's tokens as they arrive.

When stdout is not a terminal (a pipe, a file) nothing streams: the caller
prints the answer once, as before, so scripts see the same output.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from langchain_core.messages import AIMessageChunk

from pacore_graph.runs.heartbeat import HEARTBEAT_SECONDS, Silence, tick_interval, ticking
from pacore_graph.values.records import PaCoReResult

__all__ = ["HEARTBEAT_SECONDS", "LiveRun", "run_live"]


class LiveRun:
    """Renders one run's stream events; ``streamed`` says whether the answer was printed.

    :meth:`tick` is called about once a second while the run goes on (by
    :func:`run_live`); it redraws the terminal's counter, or writes the
    heartbeat line elsewhere.
    """

    def __init__(
        self,
        err: IO[str] | None,
        out: IO[str] | None,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.err = err
        self.out = out
        self.streamed = False
        self.heartbeat = heartbeat
        self._clock = clock
        self._silence = Silence(heartbeat, clock)
        self._done = 0
        self._width = 0
        self._round = 0
        self._round_start: float | None = None  # None: no round running
        self._counter = bool(err is not None and err.isatty())
        self._answer_line_open = False  # streamed tokens ended mid-line

    def progress(self, event: Mapping[str, Any]) -> None:
        if self.err is None:
            return
        kind = event.get("event")
        if kind == "round_started":
            self._done, self._width = 0, int(event["width"])
            self._round = int(event["round"]) + 1
            self._round_start = self._clock()
            self._line(f"round {self._round}: {self._width} explorer(s) started")
        elif kind == "explorer_finished":
            self._done += 1
            if not self._counter:
                self._maybe_heartbeat()
            elif not self.streamed:
                self._draw_counter()
        elif kind == "round_compacted":
            self._round_start = None
            failures = f", {event['failures']} failed" if event["failures"] else ""
            self._line(
                f"round {event['round'] + 1}: {event['messages']} message(s) kept{failures}, "
                f"{event['completion_tokens']} tokens"
            )

    def tick(self) -> None:
        """A second passed: redraw the counter, or write a line after ``heartbeat`` s of silence.

        Nothing once the answer's tokens stream (a line would break it) or
        between rounds.
        """
        if self.err is None or self._round_start is None or self.streamed:
            return
        if self._counter:
            self._draw_counter()
        else:
            self._maybe_heartbeat()

    def token(self, chunk: AIMessageChunk) -> None:
        if self.out is None or not isinstance(chunk.content, str) or not chunk.content:
            return
        if not self.streamed and self._counter:
            assert self.err is not None
            self.err.write("\r\x1b[K")  # the counter leaves the line to the answer
            self.err.flush()
        self.streamed = True
        self._answer_line_open = True
        self.out.write(chunk.content)
        self.out.flush()

    def _elapsed(self) -> int:
        start = self._round_start
        return 0 if start is None else round(self._clock() - start)

    def _draw_counter(self) -> None:
        assert self.err is not None
        self.err.write(f"\r  {self._done}/{self._width} done, {self._elapsed()} s")
        self.err.flush()

    def _maybe_heartbeat(self) -> None:
        if self._round_start is None or not self._silence.due():
            return
        self._line(
            f"round {self._round}: {self._done}/{self._width} explorer(s) done, {self._elapsed()} s"
        )

    def _line(self, text: str) -> None:
        assert self.err is not None
        prefix = "\r\x1b[K" if self._counter else ""
        if self._counter and self._answer_line_open:
            prefix = "\n"  # after the streamed answer's last line, not over it
            self._answer_line_open = False
        self.err.write(f"{prefix}{text}\n")
        self.err.flush()
        self._silence.wrote()


async def run_live(
    graph: Any,
    question: str,
    *,
    err: IO[str] | None,
    out: IO[str] | None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> tuple[PaCoReResult, bool]:
    """Run one question with live output; returns the result and whether its tokens streamed.

    ``err=None`` hides progress; ``out=None`` turns token streaming off (the
    final call then goes out as an ordinary request). ``heartbeat`` is the
    longest silence on a non-terminal ``err`` while a round runs.
    """
    live = LiveRun(err, out, heartbeat=heartbeat)
    modes = ["custom", "values"] + (["messages"] if out is not None else [])
    final: Mapping[str, Any] = {}
    ticks: contextlib.AbstractAsyncContextManager[None] = (
        ticking(live.tick, tick_interval(heartbeat)) if err else contextlib.nullcontext()
    )
    async with ticks:
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
