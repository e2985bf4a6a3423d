"""Named benchmarks: the built-ins, and adapters other packages register as entry points.

``--dataset NAME`` looks ``NAME`` up here. A package adds its own benchmark
by declaring, in its ``pyproject.toml``::

    [project.entry-points."pacore_graph.datasets"]
    my-bench = "my_package.bench:MY_BENCH"

where ``MY_BENCH`` is a :class:`~pacore_graph.eval.benchmarks.base.Benchmark`
(or a function of no arguments returning one). ``module:attr`` on the command
line names one without registering it. Built-in names win over entry points,
so an installed package cannot silently replace ``hmmt25``.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from pacore_graph.eval.benchmarks.base import Benchmark, DatasetError
from pacore_graph.eval.benchmarks.code import LIVECODEBENCH
from pacore_graph.eval.benchmarks.gpqa import GPQA_DIAMOND
from pacore_graph.eval.benchmarks.hle import HLE
from pacore_graph.eval.benchmarks.math import AIME25, HMMT25
from pacore_graph.eval.benchmarks.multichallenge import MULTICHALLENGE

__all__ = [
    "BUILTIN_BENCHMARKS",
    "ENTRY_POINT_GROUP",
    "benchmark_from_object",
    "benchmark_names",
    "find_benchmark",
    "load_benchmark_attr",
]

ENTRY_POINT_GROUP = "pacore_graph.datasets"

BUILTIN_BENCHMARKS: dict[str, Benchmark] = {
    b.name: b for b in (HMMT25, AIME25, LIVECODEBENCH, HLE, GPQA_DIAMOND, MULTICHALLENGE)
}


def benchmark_from_object(obj: object, where: str) -> Benchmark:
    """A Benchmark from what an entry point or ``module:attr`` names (an object or a factory)."""
    if not isinstance(obj, Benchmark) and callable(obj) and not isinstance(obj, type):
        obj = obj()
    if not isinstance(obj, Benchmark):
        raise DatasetError(
            f"{where} is a {type(obj).__name__}, not a pacore_graph.eval.benchmarks.Benchmark"
        )
    return obj


def _registered() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def benchmark_names() -> list[str]:
    """Every name ``--dataset NAME`` accepts: built-ins first, then registered ones."""
    extra = sorted(n for n in _registered() if n not in BUILTIN_BENCHMARKS)
    return [*BUILTIN_BENCHMARKS, *extra]


def find_benchmark(name: str) -> Benchmark | None:
    """The benchmark called ``name``, or None when nothing has that name."""
    if name in BUILTIN_BENCHMARKS:
        return BUILTIN_BENCHMARKS[name]
    ep = _registered().get(name)
    if ep is None:
        return None
    where = f"entry point {name!r} ({ENTRY_POINT_GROUP})"
    try:
        obj = ep.load()  # type: ignore[attr-defined]
    except Exception as exc:
        raise DatasetError(f"{where} failed to load: {type(exc).__name__}: {exc}") from None
    return benchmark_from_object(obj, where)


def load_benchmark_attr(spec: str) -> Benchmark:
    """``module:attr`` -> the Benchmark it names (imported now; errors name the spec)."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DatasetError(f"{spec}: cannot import {module_name!r} ({exc})") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise DatasetError(f"{spec}: module {module_name!r} has no {attr!r}") from None
    return benchmark_from_object(obj, spec)
