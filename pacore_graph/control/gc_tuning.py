"""Garbage-collector settings for a process that fans out thousands of explorers.

Why: a PaCoRe batch allocates many short-lived objects per explorer task
(LangGraph tasks, configs, callback managers, futures), and CPython's default
young-generation threshold (700 allocations) then runs a collection every few
tasks, each walking a heap full of long-lived modules and state. Measured with
``benchmarks/bench_send_cost.py`` (200 problems at ``high``, do-nothing
explorer): 3.6 s of CPU with the defaults, 2.3 s with young collections every
50,000 allocations instead; peak RSS unchanged (181 MB). Freezing the start-up
heap (``gc.freeze()``) on top of that gained nothing measurable.

It changes process-wide state, so the library never does it on import: the
``pacore`` command wraps ``run`` and ``eval`` in :func:`fan_out_gc`, which
restores the previous settings afterwards, and a program embedding the graph
may do the same around its batch.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["FAN_OUT_GC_THRESHOLDS", "fan_out_gc"]

#: (young, middle, old) thresholds of :func:`gc.set_threshold` during a batch.
FAN_OUT_GC_THRESHOLDS: tuple[int, int, int] = (50_000, 20, 100)


@contextlib.contextmanager
def fan_out_gc() -> Iterator[None]:
    """Collect less often inside the block; restore the previous thresholds on exit."""
    old = gc.get_threshold()
    gc.set_threshold(*FAN_OUT_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)
