"""Helpers for the tests of votes off the event loop (values/aggregation and PaCoRe's finalize).

Shared by tests/values/test_aggregation.py (``aggregate_off_loop`` itself) and
tests/graph/test_off_loop_vote.py (the same through a graph over HTTP).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pacore_graph.values.aggregation import Aggregator, Verdict, extract_final_answer
from pacore_graph.values.records import Trajectory

__all__ = ["Recorded", "loop_lag", "slow_extract"]


async def loop_lag(done: asyncio.Event) -> float:
    """The longest the event loop went without running this task until ``done``, in seconds."""
    worst, last = 0.0, time.monotonic()
    while not done.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        worst, last = max(worst, now - last - 0.01), now
    return worst


@dataclass
class Recorded:
    """An aggregator recording where and how long it ran, and how it ended."""

    inner: Aggregator
    name: str = "recorded"
    thread: int | None = None
    started: threading.Event = field(default_factory=threading.Event)
    ended: list[tuple[float, str]] = field(default_factory=list)

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        self.thread = threading.get_ident()
        self.started.set()
        outcome = "returned"
        try:
            return self.inner.aggregate(rounds)
        except BaseException as exc:
            outcome = type(exc).__name__
            raise
        finally:
            self.ended.append((time.monotonic(), outcome))


def slow_extract(text: str) -> str | None:
    """The vote's extraction plus 4 ms of pure-Python CPU (holding the GIL as parsing does).

    A warm math-verify parses a short answer in about a millisecond, so 120
    fresh words alone can vote in 0.15 s: too quick to tell a stalled loop
    from a free one. The burn makes every vote of the test last at least
    0.48 s, on any machine and whatever ran before it in the process.
    """
    until = time.perf_counter() + 0.004
    while time.perf_counter() < until:
        pass
    return extract_final_answer(text)
