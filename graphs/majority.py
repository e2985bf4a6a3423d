"""Baseline: self-consistency, K samples and a majority vote over their answers.

Uses the PaCoRe graph's explorer round (the same ``Send`` fan-out and
``n``-batching) with a :class:`~pacore_graph.values.aggregation.MajorityVote` in place
of the synthesis round: K trajectories, no extra call for the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.llm.client import ChatClient
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.values.aggregation import MajorityVote, extract_final_answer

__all__ = ["build_majority_graph"]


def build_majority_graph(
    client: ChatClient,
    k: int,
    *,
    config: PaCoReConfig | None = None,
    extract: Callable[[str], str | None] = extract_final_answer,
    **kwargs: Any,
) -> Any:
    """K samples, majority vote (ties: the answer first given by the lowest index)."""
    cfg = (config or PaCoReConfig()).with_settings({"rounds": [k]})  # validated like any width
    return build_pacore_graph(
        client, config=cfg, aggregator=MajorityVote(extract=extract), name="majority", **kwargs
    )
