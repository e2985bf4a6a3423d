"""Straggler control: close a round at a quorum of explorers or at a deadline.

Why: reasoning lengths are heavy-tailed, so a round of K explorers waits for
its longest trajectory while the server has capacity to spare. Closing the
round once Q explorers have finished (``--round-quorum``) or S seconds after
it started (``--round-deadline``) trades some references for wall time. It
changes what the next round sees, so it is off by default, and explorers cut
off are recorded as ``dropped`` -- never as failures, never silently.

Two rules keep a round meaningful:

- the final K=1 round is never cut (its one explorer is the answer);
- the deadline only closes a round once at least one explorer has finished
  (a round with no references would make the next one blind).

A *finished* explorer is one whose call returned, successfully or not.

:class:`RoundQuorum` is the validated setting; :class:`RoundGate` is its
state for one round of one problem: explorers run their call through
:meth:`RoundGate.run`, which races it against the round closing and cancels
the call (upstream: the HTTP request is abandoned) when the round closes
first.

With the plain chat explorer a round stays one ``n=K`` request: streamed
under round control, so each explorer's call returns when its own sample
finishes, and cancelling the last waiting explorers disconnects the request
(see :mod:`pacore_graph.llm.batching`). A client that cannot stream ``n`` samples
falls back to one request per explorer.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, TypeVar

__all__ = ["DROPPED", "Dropped", "RoundGate", "RoundQuorum", "parse_quorum"]

T = TypeVar("T")


class Dropped:
    """Marker returned by :meth:`RoundGate.run` for an explorer cut off by the gate."""

    _instance: Dropped | None = None

    def __new__(cls) -> Dropped:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DROPPED"


DROPPED: Final = Dropped()


def parse_quorum(text: str) -> float | int:
    """``--round-quorum`` value: a share of K in (0, 1] (``0.75``) or a count (``24``)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"--round-quorum takes a share of K such as 0.75 or a count such as 24; got {text!r}"
        ) from None
    if value <= 0 or not math.isfinite(value):
        raise ValueError(f"--round-quorum must be positive; got {text!r}")
    if value <= 1 and "." in text:
        return value
    if value != int(value):
        raise ValueError(f"--round-quorum above 1 is a count and must be whole; got {text!r}")
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundQuorum:
    """When a round may close early: ``quorum`` (share or count) and/or ``deadline`` seconds."""

    quorum: float | int | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        q = self.quorum
        if q is not None:
            if isinstance(q, bool) or q <= 0:
                raise ValueError(f"quorum must be a positive share or count; got {q!r}")
            if isinstance(q, float) and q > 1:
                raise ValueError(f"a quorum share must be at most 1; got {q!r}")
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(f"round deadline must be positive seconds; got {self.deadline!r}")

    @property
    def enabled(self) -> bool:
        return self.quorum is not None or self.deadline is not None

    def required(self, width: int) -> int:
        """Explorers that must finish before a round of ``width`` closes on quorum."""
        if width <= 1 or self.quorum is None:
            return width
        if isinstance(self.quorum, float):
            return max(1, min(width, math.ceil(self.quorum * width - 1e-9)))
        return max(1, min(width, self.quorum))

    def gate(self, width: int) -> RoundGate:
        return RoundGate(width, self)


class RoundGate:
    """One round's quorum/deadline state; shared by that round's explorers."""

    def __init__(self, width: int, quorum: RoundQuorum) -> None:
        self.width = width
        self.required = quorum.required(width)
        # The final K=1 round is never cut: no deadline for a lone explorer.
        self.deadline = quorum.deadline if width > 1 else None
        self.finished = 0
        self.dropped = 0
        self.reason: str | None = None
        self._closed = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._deadline_passed = False

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def deadline_passed(self) -> bool:
        return self._deadline_passed

    def _start_clock(self) -> None:
        if self.deadline is not None and self._timer is None and not self._deadline_passed:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.deadline, self._on_deadline)

    def _on_deadline(self) -> None:
        self._deadline_passed = True
        if self.finished > 0:
            self._close(f"deadline {self.deadline:g}s")

    def _close(self, reason: str) -> None:
        if not self._closed.is_set():
            self.reason = reason
            self._closed.set()
        if self._timer is not None:
            self._timer.cancel()

    def _on_finish(self) -> None:
        self.finished += 1
        if self.finished >= self.required and self.finished < self.width:
            self._close(f"quorum {self.required}/{self.width}")
        elif self._deadline_passed:
            self._close(f"deadline {self.deadline:g}s")
        if self.finished + self.dropped >= self.width and self._timer is not None:
            self._timer.cancel()

    async def run(self, call: Callable[[], Awaitable[T]]) -> T | Dropped:
        """Run one explorer's call unless the round closes first (then cancel it)."""
        if self._closed.is_set():
            self.dropped += 1
            return DROPPED
        self._start_clock()
        task = asyncio.ensure_future(call())
        closer = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({task, closer}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            closer.cancel()
            raise
        closer.cancel()
        if task.done():
            self._on_finish()
            return task.result()  # a failed call raises here: it is the explorer's error
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we were cancelled ourselves, not just our call
        except Exception:  # the call failed while being cancelled: still dropped
            pass
        self.dropped += 1
        return DROPPED
