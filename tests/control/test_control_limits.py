"""SequenceLimiter on its own: a FIFO weighted semaphore, one counter per event loop.

No test here waits on a clock: tasks are stepped with ``asyncio.sleep(0)``
(one turn of the loop) and released by events, so what is checked is the
order of admission, not how fast it happens.
"""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from pacore_graph.control.limits import SequenceLimiter


async def settle(turns: int = 5) -> None:
    """Let every runnable task advance until it blocks again."""
    for _ in range(turns):
        await asyncio.sleep(0)


class Holder:
    """A task that takes ``units`` and keeps them until told to let go."""

    def __init__(self, limiter: SequenceLimiter, name: str, units: int, log: list[str]) -> None:
        self.release = asyncio.Event()
        # A context of its own: another explorer's hold, not one inside the caller's.
        self.task = asyncio.create_task(
            self._run(limiter, name, units, log), context=contextvars.Context()
        )

    async def _run(self, limiter: SequenceLimiter, name: str, units: int, log: list[str]) -> None:
        async with limiter.hold(units):
            log.append(name)
            await self.release.wait()


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        SequenceLimiter(0)


async def test_units_are_taken_and_given_back() -> None:
    limiter = SequenceLimiter(8)
    assert limiter.in_use() == 0
    async with limiter.hold(3):
        assert limiter.in_use() == 3
        waiting = Holder(limiter, "five", 5, [])  # another task's hold takes its own
        await settle()
        assert limiter.in_use() == 8
        waiting.release.set()
        await waiting.task
        assert limiter.in_use() == 3
    assert limiter.in_use() == 0
    async with limiter.hold(0):  # a request for nothing still takes one unit
        assert limiter.in_use() == 1


async def test_a_large_request_is_not_starved_by_small_ones() -> None:
    limiter = SequenceLimiter(4)
    log: list[str] = []
    a = Holder(limiter, "a3", 3, log)
    await settle()
    big = Holder(limiter, "big4", 4, log)
    await settle()
    small = Holder(limiter, "small1", 1, log)  # one unit is free, but big4 is first in line
    await settle()
    assert log == ["a3"] and limiter.in_use() == 3
    a.release.set()
    await settle()
    assert log == ["a3", "big4"] and limiter.in_use() == 4
    big.release.set()
    await settle()
    assert log == ["a3", "big4", "small1"]
    small.release.set()
    await asyncio.gather(a.task, big.task, small.task)
    assert limiter.in_use() == 0


async def test_a_request_larger_than_the_capacity_runs_alone() -> None:
    limiter = SequenceLimiter(2)
    log: list[str] = []
    first = Holder(limiter, "one", 1, log)
    await settle()
    huge = Holder(limiter, "huge5", 5, log)
    await settle()
    assert log == ["one"]  # waits while anything else holds units
    first.release.set()
    await settle()
    assert log == ["one", "huge5"]  # then admitted, instead of waiting forever
    after = Holder(limiter, "after", 1, log)
    await settle()
    assert log == ["one", "huge5"]  # and nothing runs beside it
    huge.release.set()
    await settle()
    assert log == ["one", "huge5", "after"]
    after.release.set()
    await asyncio.gather(first.task, huge.task, after.task)


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_one_goes() -> None:
    limiter = SequenceLimiter(2)
    log: list[str] = []
    holder = Holder(limiter, "hold2", 2, log)
    await settle()
    stuck = Holder(limiter, "cancelled", 2, log)
    nxt = Holder(limiter, "next", 1, log)
    await settle()
    stuck.task.cancel()
    await settle()
    assert stuck.task.cancelled()
    holder.release.set()
    await settle()
    assert log == ["hold2", "next"]
    assert limiter.in_use() == 1  # the cancelled waiter holds nothing
    nxt.release.set()
    await asyncio.gather(holder.task, nxt.task)
    assert limiter.in_use() == 0


def test_each_event_loop_has_its_own_count() -> None:
    """A limiter shared by graphs run with ``asyncio.run`` twice: the loops do not share units."""
    limiter = SequenceLimiter(3)

    async def fill_and_report() -> int:
        async with limiter.hold(3):
            return limiter.in_use()

    async def held_elsewhere() -> int:
        # Runs in a second loop while the first still holds all units.
        async with limiter.hold(2):
            return limiter.in_use()

    async def outer() -> tuple[int, int]:
        async with limiter.hold(3):
            inner = await asyncio.to_thread(asyncio.run, held_elsewhere())
            return limiter.in_use(), inner

    assert asyncio.run(outer()) == (3, 2)
    assert asyncio.run(fill_and_report()) == 3


async def test_waiters_cancelled_together_all_end_cancelled() -> None:
    """A fan-out stopping cancels many waiters at once: each must end CancelledError.

    The first one's clean-up wakes the queue, which drops the second's (already
    cancelled) entry; the second then found its entry gone and raised ValueError
    ("... is not in deque"), which the fan-out recorded as a failed problem.
    """
    limiter = SequenceLimiter(1)
    release = asyncio.Event()

    async def holder() -> None:
        async with limiter.hold(1):
            await release.wait()

    async def waiter() -> None:
        async with limiter.hold(1):
            pass

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(waiter()) for _ in range(3)]
    await asyncio.sleep(0)
    for task in waiting:
        task.cancel()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
    release.set()
    await held
    assert limiter.in_use() == 0


async def test_a_hold_inside_a_hold_takes_nothing_more() -> None:
    """An explorer holding a unit calls code that holds the same limiter: no deadlock.

    Capacity 1, held by the outer hold: the inner one (same task, or a task it
    started) passes without waiting, while another task's hold still waits.
    """
    limiter = SequenceLimiter(1)
    order: list[str] = []

    async def inner(what: str) -> None:
        async with limiter.hold(1):
            order.append(what)

    async with limiter.hold(1):
        assert limiter.held()
        async with limiter.hold(3):  # inside: already counted
            order.append("inner")
        started = asyncio.create_task(inner("started task"))  # inherits the context
        elsewhere = asyncio.create_task(inner("elsewhere"), context=contextvars.Context())
        await settle()
        assert order == ["inner", "started task"] and not elsewhere.done()
        assert started.done() and limiter.in_use() == 1
    await settle()
    assert order == ["inner", "started task", "elsewhere"]
    assert not limiter.held() and limiter.in_use() == 0
