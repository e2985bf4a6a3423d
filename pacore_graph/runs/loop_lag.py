"""Event-loop lag of a run, measured from inside, written to a file when asked.

Why: one ``pacore`` process drives every sample of a run from one asyncio
loop, so when a fleet of model replicas grows, that loop (not the fleet)
eventually becomes the limit. Its first symptom is lag: a timer that should
fire after 10 ms fires late because the loop was busy parsing replies,
running LangGraph steps or encoding checkpoints. Lag cannot be seen from
outside the process, so ``benchmarks/bench_fleet.py`` sets
``PACORE_LOOP_LAG_FILE=PATH``: a probe task then sleeps ``INTERVAL_S`` at a
time, records how late each wake-up is, and writes a JSON summary to PATH
when the run ends. Unset (the default), nothing runs and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ENV_VAR", "INTERVAL_S", "LagProbe", "LagReport", "loop_lag_probe"]

#: Where the summary goes; unset means no probe.
ENV_VAR = "PACORE_LOOP_LAG_FILE"
#: How often the probe wakes: small enough to see short stalls, cheap (100 wake-ups/s).
INTERVAL_S = 0.01


@dataclass(frozen=True, slots=True)
class LagReport:
    """How late the probe's wake-ups were, in milliseconds, over ``samples`` wake-ups."""

    samples: int
    interval_ms: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    #: Wake-ups at least 100 ms late: stalls a user would see in a stream.
    over_100ms: int
    #: Sum of all lags: the time the loop could not answer a ready callback.
    total_lag_s: float


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class LagProbe:
    """Sleeps ``interval`` at a time on the running loop and keeps each wake-up's lateness."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.interval = interval
        self.lags: list[float] = []

    async def run(self) -> None:
        """Measure until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, loop.time() - due))

    def report(self) -> LagReport:
        """The summary of what was measured so far."""
        ordered = sorted(self.lags)
        count = len(ordered)
        total = sum(ordered)
        return LagReport(
            samples=count,
            interval_ms=self.interval * 1e3,
            mean_ms=(total / count * 1e3) if count else 0.0,
            p50_ms=_percentile(ordered, 0.50) * 1e3,
            p90_ms=_percentile(ordered, 0.90) * 1e3,
            p99_ms=_percentile(ordered, 0.99) * 1e3,
            max_ms=(ordered[-1] * 1e3) if count else 0.0,
            over_100ms=sum(1 for lag in ordered if lag >= 0.1),
            total_lag_s=total,
        )


@contextlib.asynccontextmanager
async def loop_lag_probe(env: Mapping[str, str] | None = None) -> AsyncIterator[LagProbe | None]:
    """Probe the running loop while the block runs if ``PACORE_LOOP_LAG_FILE`` names a file.

    The summary is written when the block ends, however it ends (an
    interrupted run's lag is still worth reading); a file that cannot be
    written is reported on the way out as the ``OSError`` it is.
    """
    target = (os.environ if env is None else env).get(ENV_VAR, "").strip()
    if not target:
        yield None
        return
    probe = LagProbe()
    task = asyncio.get_running_loop().create_task(probe.run())
    try:
        yield probe
    finally:
        task.cancel()
        await asyncio.wait([task])  # the probe's own cancellation is not the caller's
        Path(target).write_text(json.dumps(asdict(probe.report())) + "\n", encoding="utf-8")
