"""The progress of a batch run (``pacore run --input``, ``pacore eval``).

:func:`progress_bar` is a tqdm bar on stderr, or, with progress off,
:class:`NoBar`, which takes the same calls and does nothing. Not
``tqdm(disable=True)``: even disabled, tqdm starts a monitor thread and a
multiprocessing lock, ~20 ms before the first request of every run.

A tqdm bar only redraws when a unit finishes, and a sample of the embedded
model takes up to 90 s: :func:`live_progress` keeps the progress going while
the work runs, as ``pacore run`` does for one question
(:mod:`pacore_graph.runs.heartbeat`). On a terminal the bar is redrawn every
second (its elapsed time moves); elsewhere (a pipe, a log, where tqdm's
carriage returns make one endless line) :class:`ProgressLines` writes a line
per finished unit and one after every ``HEARTBEAT_SECONDS`` of silence.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

from pacore_graph.runs.heartbeat import HEARTBEAT_SECONDS, Silence, tick_interval, ticking

__all__ = ["NoBar", "ProgressLines", "live_progress", "progress_bar"]


class NoBar:
    """What the run loops call on a progress bar, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(
    total: int, *, desc: str, unit: str, enabled: bool, file: IO[str] | None = None
) -> Any:
    """A tqdm bar counting ``unit``\\ s on ``file`` (stderr when None); a :class:`NoBar` if off."""
    if not enabled:
        return NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=file or sys.stderr)


class ProgressLines:
    """A progress bar's calls as lines: ``majority:4: 3/10 run(s) done, 12 s``.

    One line per :meth:`update` (a finished unit), and one from :meth:`tick`
    once ``heartbeat`` seconds passed without a line while units remain; the
    line carries the ``set_postfix`` fields, if any. For a stream that is not
    a terminal: each line is whole, so a log reads it as it comes.
    """

    def __init__(
        self,
        total: int,
        *,
        desc: str,
        unit: str,
        file: IO[str],
        heartbeat: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.n = 0
        self.desc = desc
        self.unit = unit
        self.file = file
        self._clock = clock
        self._start = clock()
        self._silence = Silence(heartbeat, clock)
        self._postfix = ""

    def update(self, n: int = 1) -> None:
        self.n += n
        self._line()

    def set_postfix(self, **kwargs: Any) -> None:
        self._postfix = "".join(f", {k}={v}" for k, v in kwargs.items())

    def tick(self) -> None:
        """About once a second: a line if units are running and the last line is too old."""
        if self.n < self.total and self._silence.due():
            self._line()

    def close(self) -> None:
        pass

    def _line(self) -> None:
        elapsed = round(self._clock() - self._start)
        self.file.write(
            f"{self.desc}: {self.n}/{self.total} {self.unit}(s) done{self._postfix}, {elapsed} s\n"
        )
        self.file.flush()
        self._silence.wrote()


@contextlib.asynccontextmanager
async def live_progress(
    total: int,
    *,
    desc: str,
    unit: str,
    enabled: bool,
    file: IO[str] | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> AsyncIterator[Any]:
    """The progress of ``total`` units while the block runs (module docstring); closed after.

    Yields a :class:`NoBar` when off; on a terminal ``file`` (stderr when
    None) a tqdm bar redrawn every second; elsewhere :class:`ProgressLines`.
    """
    if not enabled:
        yield NoBar()
        return
    stream = file or sys.stderr
    if stream.isatty():
        bar = progress_bar(total, desc=desc, unit=unit, enabled=True, file=stream)
        tick: Callable[[], None] = bar.refresh
    else:
        bar = ProgressLines(total, desc=desc, unit=unit, file=stream, heartbeat=heartbeat)
        tick = bar.tick
    try:
        async with ticking(tick, tick_interval(heartbeat)):
            yield bar
    finally:
        bar.close()
