"""runs/heartbeat: the silence clock and the ticker every progress renderer shares."""

from __future__ import annotations

import asyncio
import time

from pacore_graph.runs.heartbeat import HEARTBEAT_SECONDS, Silence, tick_interval, ticking


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_silence_is_due_after_the_heartbeat_and_starts_again_with_each_line() -> None:
    clock = Clock()
    silence = Silence(5.0, clock)
    clock.now = 4.9
    assert not silence.due()
    clock.now = 5.0
    assert silence.due()
    silence.wrote()
    clock.now = 9.9
    assert not silence.due()
    clock.now = 10.0
    assert silence.due()


def test_ticks_come_every_second_or_twice_a_short_heartbeat() -> None:
    assert HEARTBEAT_SECONDS == 5.0  # issue 31: no silence longer than 10 s, 5 s chosen
    assert tick_interval(HEARTBEAT_SECONDS) == 1.0
    assert tick_interval(0.4) == 0.2


async def test_ticking_calls_tick_while_the_block_runs_and_stops_after() -> None:
    stamps: list[float] = []
    start = time.monotonic()
    async with ticking(lambda: stamps.append(time.monotonic()), 0.05):
        await asyncio.sleep(0.32)
    count = len(stamps)
    await asyncio.sleep(0.15)
    assert len(stamps) == count, "the ticker ran on after its block"
    assert 3 <= count <= 7, stamps
    assert stamps[0] - start >= 0.05
