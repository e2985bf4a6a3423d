"""Run admission: at most ``max_running`` runs, the next ``max_queued`` waiting in order.

A model server under load queues (vLLM's scheduler, TGI's router); a client
that gets 429 the moment the server is busy has to guess when to come back,
and the ``openai`` SDK's two retries after a second or so rarely land in a
free slot. So a request over ``--max-concurrency`` waits here instead, in
arrival order (a FIFO: a later request never starts before an earlier one),
and is refused only when:

- the queue already holds ``max_queued`` requests: :class:`QueueFullError`
  (the app answers 429 with ``Retry-After``, as TGI does when overloaded);
- it waited ``timeout_s`` without a slot: :class:`QueueTimeoutError` (the app
  answers 503 with ``Retry-After``: the server is up but could not start the
  run in time, which is not the client's rate; nginx and Envoy answer a queue
  timeout the same way).

A waiter that is cancelled (its client hung up) leaves the queue at once and
takes no slot; a slot granted just as its waiter was cancelled is handed on
to the next one. Everything runs on the server's one event loop, so plain
counters suffice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

from pacore_graph.errors import PaCoReError

__all__ = ["QueueFullError", "QueueTimeoutError", "RunQueue"]


class QueueFullError(PaCoReError):
    """Every slot is taken and the queue is full: come back later."""


class QueueTimeoutError(PaCoReError):
    """The request waited its whole queue timeout without a slot."""


class RunQueue:
    """A FIFO admission gate with a bounded queue and a wait deadline.

    ``running`` counts slots held, ``queued`` the requests waiting; the
    counters ``admitted``, ``rejected`` (queue full), ``timed_out`` and
    ``abandoned`` (cancelled while waiting) only grow.
    """

    def __init__(self, max_running: int, max_queued: int, timeout_s: float | None) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be >= 1, got {max_running}")
        if max_queued < 0:
            raise ValueError(f"max_queued must be >= 0, got {max_queued}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.max_running = max_running
        self.max_queued = max_queued
        self.timeout_s = timeout_s
        self.running = 0
        self.admitted = 0
        self.rejected = 0
        self.timed_out = 0
        self.abandoned = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        """Requests waiting for a slot now."""
        return len(self._waiters)

    async def acquire(self) -> float:
        """Take a slot, waiting in line if need be; the seconds waited.

        Raises :class:`QueueFullError` at once when the queue is full,
        :class:`QueueTimeoutError` after ``timeout_s`` in the queue.
        """
        if self.running < self.max_running and not self._waiters:
            self.running += 1
            self.admitted += 1
            return 0.0
        if len(self._waiters) >= self.max_queued:
            self.rejected += 1
            raise QueueFullError(
                f"{self.running} runs in progress and {len(self._waiters)} queued (the most "
                "the server queues); retry later"
            )
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                await fut
        except TimeoutError:
            if fut.done() and not fut.cancelled():
                return self._granted(started)  # the slot came as the deadline passed
            self._leave(fut)
            self.timed_out += 1
            raise QueueTimeoutError(
                f"no run slot within the queue timeout ({self.timeout_s:g} s); retry later"
            ) from None
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # granted just as we were cancelled: pass it on
            else:
                self._leave(fut)
            self.abandoned += 1
            raise
        return self._granted(started)

    def release(self) -> None:
        """Give a slot back: to the longest-waiting request, else free it."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes on; ``running`` is unchanged
                return
        self.running -= 1

    def _granted(self, started: float) -> float:
        self.admitted += 1
        return time.monotonic() - started

    def _leave(self, fut: asyncio.Future[None]) -> None:
        fut.cancel()
        with contextlib.suppress(ValueError):  # already handed over and skipped
            self._waiters.remove(fut)
