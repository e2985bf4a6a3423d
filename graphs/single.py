"""Baseline: a single sample, the answer as it comes.

The same graph, records and TTC accounting as PaCoRe (one round of width 1,
no synthesis), so it sits on the same scaling plot.
"""

from __future__ import annotations

from typing import Any

from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.llm.client import ChatClient
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.values.aggregation import FirstAnswer

__all__ = ["build_single_graph"]


def build_single_graph(
    client: ChatClient, *, config: PaCoReConfig | None = None, **kwargs: Any
) -> Any:
    """One trajectory; ``config`` supplies sampling, retries and the concurrency limit."""
    cfg = (config or PaCoReConfig()).with_settings({"rounds": [1]})
    return build_pacore_graph(client, config=cfg, aggregator=FirstAnswer(), name="single", **kwargs)
