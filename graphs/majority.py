"""Baseline: self-consistency, K samples and a majority vote over their answers.

Uses the PaCoRe graph's explorer round (the same ``Send`` fan-out and
``n``-batching) with a :class:`~pacore_graph.graph.aggregation.MajorityVote` in place
of the synthesis round: K trajectories, no extra call for the answer. The
vote runs off the event loop (:class:`~pacore_graph.graphs.method_graph.VoteNodes`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.aggregation import MajorityVote, extract_final_answer
from pacore_graph.graph.compaction import Compactor
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.state import PaCoReState
from pacore_graph.graph.vote_nodes import VoteNodes
from pacore_graph.graphs.method_graph import compile_method_graph, method_parts
from pacore_graph.llm.client import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.request_limits import RequestLimits

__all__ = ["build_majority_graph"]


def build_majority_graph(
    client: ChatClient,
    k: int,
    *,
    config: PaCoReConfig | None = None,
    extract: Callable[[str], str | None] = extract_final_answer,
    compactor: Compactor | str = "conclusion",
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> Any:
    """K samples, majority vote (ties: the answer first given by the lowest index)."""
    cfg = (config or PaCoReConfig()).with_settings({"rounds": [k]})  # validated like any width
    parts = method_parts(
        client,
        cfg,
        compactor=compactor,
        limiter=limiter,
        tracing=tracing,
        compactors=compactors,
        limits=limits,
    )
    nodes = VoteNodes(
        **parts.node_kwargs(),
        explorer=parts.explorer,
        aggregator=MajorityVote(extract=extract),
        name="majority",
    )
    return compile_method_graph(
        nodes,
        PaCoReState,
        name="majority",
        checkpointer=checkpointer,
        compactor=compactor if isinstance(compactor, str) else None,
    )
