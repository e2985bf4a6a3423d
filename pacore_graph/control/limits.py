"""Concurrency limits shared by every problem a graph runs.

One compiled graph serves many problems at once (``pacore run --input``), and
the limit that matters to the server is the number of *sequences* it decodes
at once, so a request with ``n=32`` takes 32 units. asyncio primitives belong
to one event loop, while a compiled graph may be used from several (tests,
notebooks, ``asyncio.run`` per call), so the limiter keeps one counter per
running loop.

A hold inside a hold of the same limiter, in the same task or a task it
started, takes nothing more: the outer hold already counts that work. This
is what lets a custom explorer share the graph's limiter with the chat
explorer it wraps (the graph holds one unit per trajectory around the
custom explorer, and the inner batcher would otherwise wait for units its
own callers hold: with K >= the capacity, forever).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

__all__ = ["SequenceLimiter"]

#: The limiters (and the loop) the current task, or the task that started it, holds units of.
_HELD: ContextVar[frozenset[tuple[int, int]]] = ContextVar(
    "pacore_limiters_held", default=frozenset()
)


class _LoopState:
    __slots__ = ("available", "waiters")

    def __init__(self, capacity: int) -> None:
        self.available = capacity
        self.waiters: deque[tuple[int, asyncio.Future[None]]] = deque()


class SequenceLimiter:
    """A FIFO weighted semaphore: ``async with limiter.hold(n)`` takes n units.

    FIFO matters: a large request waiting for room must not be starved by a
    stream of small ones. A request larger than the capacity is admitted alone
    (when nothing else holds units) instead of waiting forever.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState(self.capacity)
        return state

    def in_use(self) -> int:
        """Units held in the current loop (for tests and progress displays)."""
        return self.capacity - self._state().available

    def _fits(self, state: _LoopState, units: int) -> bool:
        return units <= state.available or state.available == self.capacity

    def _key(self) -> tuple[int, int]:
        return (id(self), id(asyncio.get_running_loop()))

    def held(self) -> bool:
        """Whether the current task already holds units of this limiter (see the module doc)."""
        return self._key() in _HELD.get()

    @asynccontextmanager
    async def hold(self, units: int = 1) -> AsyncIterator[None]:
        held = _HELD.get()
        key = self._key()
        if key in held:  # inside a hold of ours: that hold already counts this work
            yield
            return
        state = self._state()
        units = max(1, units)
        if not state.waiters and self._fits(state, units):
            state.available -= units
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (units, fut)
            state.waiters.append(entry)
            try:
                await fut
            except BaseException:
                if fut.done() and not fut.cancelled():
                    # Granted just as we were cancelled: give the units back.
                    state.available += units
                    self._wake(state)
                else:
                    # Another waiter's clean-up may already have dropped this
                    # cancelled entry (``_wake`` skips done futures).
                    if entry in state.waiters:
                        state.waiters.remove(entry)
                    self._wake(state)
                raise
        token = _HELD.set(held | {key})
        try:
            yield
        finally:
            _HELD.reset(token)
            state.available += units
            self._wake(state)

    def _wake(self, state: _LoopState) -> None:
        while state.waiters:
            units, fut = state.waiters[0]
            if fut.done():
                state.waiters.popleft()
                continue
            if not self._fits(state, units):
                return
            state.waiters.popleft()
            state.available -= units
            fut.set_result(None)
