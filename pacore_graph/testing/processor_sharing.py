"""Processor sharing: how a batching inference server divides its decode throughput.

vLLM decodes every sequence in flight in one batch per step, so its tokens/s
are shared by those sequences, and one sequence alone cannot go faster than a
single decode stream (the per-sequence cap). With equal shares, every active
sequence advances at the same rate ``min(cap, throughput / active)``, so one
number -- the tokens each active sequence has received since the start
(*virtual progress*) -- describes them all: a sequence admitted at progress
``v0`` with ``length`` tokens finishes when progress reaches ``v0 + length``.
A heap of those finish marks makes each event O(log n).

The clock is passed in (``now``), never read here, so the arithmetic is tested
with exact virtual times and the server supplies its event loop's clock.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

__all__ = ["ProcessorSharing", "SharingStats"]


@dataclass(slots=True)
class _Sequence:
    start: float
    length: int


@dataclass(frozen=True, slots=True)
class SharingStats:
    """Counters of one :class:`ProcessorSharing`, all since its creation or last reset."""

    tokens_generated: int
    """Tokens decoded: full lengths of finished sequences plus what cancelled ones got."""
    sequences: int
    completed: int
    cancelled: int
    in_flight: int
    peak_in_flight: int
    busy_seconds: float
    """Time with at least one sequence in flight."""


class ProcessorSharing:
    """Equal shares of ``throughput`` tokens/s, at most ``per_sequence_cap`` each."""

    def __init__(self, throughput: float, per_sequence_cap: float, now: float = 0.0) -> None:
        if throughput <= 0 or per_sequence_cap <= 0:
            raise ValueError("throughput and per_sequence_cap must be positive")
        self.throughput = float(throughput)
        self.per_sequence_cap = float(per_sequence_cap)
        self._now = now
        self._progress = 0.0
        self._active: dict[int, _Sequence] = {}
        self._heap: list[tuple[float, int]] = []
        self._next_id = 0
        self._reset_counters()

    def _reset_counters(self) -> None:
        self._tokens = 0
        self._sequences = 0
        self._completed = 0
        self._cancelled = 0
        self._peak = len(self._active)
        self._busy = 0.0

    def reset_stats(self) -> None:
        """Zero the counters (sequences in flight stay in flight)."""
        self._reset_counters()

    @property
    def in_flight(self) -> int:
        return len(self._active)

    def rate(self) -> float:
        """Tokens/s each active sequence receives now (0 when idle)."""
        if not self._active:
            return 0.0
        return min(self.per_sequence_cap, self.throughput / len(self._active))

    def _advance(self, now: float) -> None:
        dt = now - self._now
        if dt > 0:
            if self._active:
                self._progress += self.rate() * dt
                self._busy += dt
            self._now = now

    def admit(self, now: float, length: int) -> int:
        """Start a sequence of ``length`` tokens; returns its id."""
        self._advance(now)
        seq_id = self._next_id
        self._next_id += 1
        length = max(0, int(length))
        self._active[seq_id] = _Sequence(start=self._progress, length=length)
        heapq.heappush(self._heap, (self._progress + length, seq_id))
        self._sequences += 1
        self._peak = max(self._peak, len(self._active))
        return seq_id

    def cancel(self, now: float, seq_id: int) -> None:
        """Stop a sequence early (its client went away); counts the tokens it got."""
        self._advance(now)
        seq = self._active.pop(seq_id, None)
        if seq is not None:  # its heap entry is skipped lazily
            self._tokens += min(seq.length, int(self._progress - seq.start))
            self._cancelled += 1

    def finish_due(self, now: float, tolerance: float = 1e-4) -> list[int]:
        """Ids of the sequences done by ``now``, removed from the active set.

        ``tolerance`` (seconds of decoding) absorbs timers that fire a hair early.
        """
        self._advance(now)
        slack = self.rate() * tolerance + 1e-9
        done: list[int] = []
        while self._heap and self._heap[0][0] <= self._progress + slack:
            _, seq_id = heapq.heappop(self._heap)
            seq = self._active.pop(seq_id, None)
            if seq is None:
                continue  # cancelled earlier
            self._tokens += seq.length
            self._completed += 1
            done.append(seq_id)
        self._drop_cancelled_top()
        return done

    def _drop_cancelled_top(self) -> None:
        while self._heap and self._heap[0][1] not in self._active:
            heapq.heappop(self._heap)

    def next_finish(self) -> float | None:
        """When the next sequence finishes if nothing is admitted or cancelled before."""
        self._drop_cancelled_top()
        if not self._heap:
            return None
        return self._now + max(0.0, self._heap[0][0] - self._progress) / self.rate()

    def stats(self, now: float) -> SharingStats:
        self._advance(now)
        return SharingStats(
            tokens_generated=self._tokens,
            sequences=self._sequences,
            completed=self._completed,
            cancelled=self._cancelled,
            in_flight=len(self._active),
            peak_in_flight=self._peak,
            busy_seconds=self._busy,
        )
