"""PaCoRe's nodes for a method that ends in a vote: the vote runs off the event loop.

``PaCoReNodes.finalize`` calls its aggregator synchronously, and graph nodes
run on the event loop. A vote over a thousand distinct answers is seconds of
CPU (math-verify parses each one): on the loop it would stall every other run
of the process, its health checks and its signal handling (``pacore
serve``), and a cancelled run could not stop it. :class:`VoteNodes` runs the
aggregator first through
:func:`~pacore_graph.graph.aggregation.aggregate_off_loop` (a worker thread
that a cancelled run stops at its next answer), then lets PaCoRe's finalize
record that verdict exactly as it records its own call's: same details,
spans, message and errors.

The methods that end in a vote (``majority``, ``deepconf``,
``deepconf-online``, ``rsa`` in :mod:`pacore_graph.graphs`) use it; a graph
built by :func:`~pacore_graph.graph.builder.build_pacore_graph` with an
``aggregator`` still votes on the loop.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from pacore_graph.graph.aggregation import Verdict, aggregate_off_loop
from pacore_graph.graph.nodes import PaCoReNodes
from pacore_graph.graph.records import Trajectory
from pacore_graph.graph.state import PaCoReState

__all__ = ["VoteNodes"]


@dataclass(frozen=True, slots=True)
class _Decided:
    """An aggregator whose verdict was reached already (off the loop): finalize records it."""

    name: str
    verdict: Verdict

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        return self.verdict


@dataclass(slots=True, kw_only=True)
class VoteNodes(PaCoReNodes):
    """PaCoRe's nodes, with the final vote computed in a worker thread (module docstring)."""

    async def finalize(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """The aggregator's verdict, reached off the loop, recorded by PaCoRe's finalize."""
        aggregator = self.aggregator
        if aggregator is None or state.get("stopped"):
            return await PaCoReNodes.finalize(self, state, config)
        verdict = await aggregate_off_loop(aggregator, state["rounds"])
        decided = copy.copy(self)  # shares every part (tracer, gates); only the aggregator differs
        decided.aggregator = _Decided(aggregator.name, verdict)
        return await PaCoReNodes.finalize(decided, state, config)
