"""The paper's benchmarks by name, one module per family, and the adapter protocol.

- :mod:`~pacore_graph.eval.benchmarks.base`: :class:`Benchmark` (hub source,
  columns, row -> record), :class:`DatasetError`, :class:`Skip`.
- :mod:`~pacore_graph.eval.benchmarks.math`: ``hmmt25``, ``aime25`` (MathArena).
- :mod:`~pacore_graph.eval.benchmarks.code`: ``livecodebench`` (tests decoded
  with the safe unpickler, ``--since/--until``).
- :mod:`~pacore_graph.eval.benchmarks.hle`: ``hle`` (text-only, judged).
- :mod:`~pacore_graph.eval.benchmarks.gpqa`: ``gpqa-diamond``.
- :mod:`~pacore_graph.eval.benchmarks.multichallenge`: ``multichallenge`` (judged).
- :mod:`~pacore_graph.eval.benchmarks.registry`: names, entry points
  (``pacore_graph.datasets``), ``module:attr``.
"""

from __future__ import annotations

from pacore_graph.eval.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    DatasetError,
    HubDataset,
    HubFiles,
    Skip,
)
from pacore_graph.eval.benchmarks.code import PAPER_WINDOW
from pacore_graph.eval.benchmarks.registry import (
    BUILTIN_BENCHMARKS,
    ENTRY_POINT_GROUP,
    benchmark_names,
    find_benchmark,
)

__all__ = [
    "BUILTIN_BENCHMARKS",
    "ENTRY_POINT_GROUP",
    "PAPER_WINDOW",
    "Benchmark",
    "BenchmarkOptions",
    "DatasetError",
    "HubDataset",
    "HubFiles",
    "Skip",
    "benchmark_names",
    "find_benchmark",
]
