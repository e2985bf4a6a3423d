"""The longest silence a run's progress may keep: a line after ``HEARTBEAT_SECONDS`` without one.

A step of the embedded model on two cores takes 10-90 s (a round of ``pacore
run``, a sample of ``pacore eval``), most of it prompt processing with
nothing finished; a log or a pipe that stays silent that long reads as a
hang. The progress renderers (:class:`~pacore_graph.runs.live.LiveRun` for one
question, :class:`~pacore_graph.runs.progress.ProgressLines` for a batch)
share the two parts here: :class:`Silence` says when the last line is too
old, and :func:`ticking` calls a renderer's ``tick`` about once a second
while the work runs, so a line goes out even when no event arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

__all__ = ["HEARTBEAT_SECONDS", "Silence", "tick_interval", "ticking"]

HEARTBEAT_SECONDS = 5.0
"""Longest silence on a non-terminal stderr while work runs: then a progress line."""


class Silence:
    """How long since the last progress line: :meth:`due` once ``heartbeat`` seconds passed."""

    def __init__(
        self, heartbeat: float = HEARTBEAT_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.heartbeat = heartbeat
        self._clock = clock
        self._last = clock()

    def wrote(self) -> None:
        """A line just went out: the silence starts again."""
        self._last = self._clock()

    def due(self) -> bool:
        """Whether ``heartbeat`` seconds passed since the last line."""
        return self._clock() - self._last >= self.heartbeat


def tick_interval(heartbeat: float) -> float:
    """How often to tick: every second (a terminal's counter), or twice a heartbeat if shorter.

    Ticking at half the heartbeat keeps the longest gap between lines under
    ``heartbeat * 1.5`` whatever the phase of the ticks.
    """
    return min(1.0, heartbeat / 2)


@contextlib.asynccontextmanager
async def ticking(tick: Callable[[], None], every: float) -> AsyncIterator[None]:
    """Call ``tick()`` every ``every`` seconds on this loop while the block runs."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            tick()

    ticker = asyncio.create_task(loop())
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
