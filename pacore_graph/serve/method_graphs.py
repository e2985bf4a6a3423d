"""The graphs of the served methods other than PaCoRe: built on first use, a few kept.

PaCoRe requests all run one compiled graph with their settings as its
context; a served ``rsa:16,4,10`` or ``deepconf-online:16`` needs its own
graph, since the method is its nodes (RSA's subsets, DeepConf's vote), not a
setting. Compiling one takes milliseconds of CPU, small but not free on every
request, and an unbounded cache would grow with every spec a client invents
(``rsa:5,2,3``, ``rsa:6,2,3``, ...); so :class:`MethodGraphs` keeps the most
recently used :data:`DEFAULT_CACHED_METHODS`, keyed by the spec's text (``rsa``
and ``rsa:16,4,10`` parse to one text, so they share one graph).

:func:`progress_schedule` is what a stream's progress is told about a run:
its rounds' widths and whether the last round synthesises the answer (PaCoRe)
or a vote picks it (the other served methods).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pacore_graph.graphs.deepconf import default_warmup
from pacore_graph.settings.grammar import MethodSpec

__all__ = ["DEFAULT_CACHED_METHODS", "MethodGraphs", "progress_schedule"]

#: Method graphs a server keeps compiled (the defaults and a few specs of a client's own).
DEFAULT_CACHED_METHODS = 16


class MethodGraphs:
    """Compiled graphs by method spec text; the least recently used goes past ``size``.

    ``build`` compiles one spec's graph (the server's client, limiter and
    config are in it). Requests share a cached graph: each run's state is
    its own, as with the PaCoRe graph.
    """

    def __init__(
        self, build: Callable[[MethodSpec], Any], *, size: int = DEFAULT_CACHED_METHODS
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive integer, got {size!r}")
        self._build = build
        self._size = size
        self._graphs: OrderedDict[str, Any] = OrderedDict()
        #: Graphs compiled so far (cache misses), for tests and logs.
        self.built = 0

    def get(self, spec: MethodSpec) -> Any:
        """The graph of ``spec``: the cached one, or a new one compiled now."""
        graph = self._graphs.get(spec.text)
        if graph is not None:
            self._graphs.move_to_end(spec.text)
            return graph
        graph = self._build(spec)
        self.built += 1
        self._graphs[spec.text] = graph
        while len(self._graphs) > self._size:
            self._graphs.popitem(last=False)
        return graph

    def __len__(self) -> int:
        return len(self._graphs)

    def __contains__(self, text: object) -> bool:
        return text in self._graphs


def progress_schedule(spec: MethodSpec) -> tuple[tuple[int, ...], bool]:
    """The rounds a served method's run has, and whether its last one synthesises the answer.

    PaCoRe adds its K=1 synthesis round, and the aggregator agent its one
    step; RSA runs its T populations and DeepConf and the majority vote their
    N traces, then vote (no extra call);
    online DeepConf splits its N into the warm-up and the rest
    (:func:`~pacore_graph.graphs.deepconf.default_warmup`, as its graph does).
    """
    if spec.family in ("pacore", "aggagent"):
        return (*spec.rounds, 1), True
    if spec.family == "deepconf-online":
        warmup = default_warmup(spec.k)
        return (warmup, spec.k - warmup), False
    return spec.rounds, False
