"""Baseline: sequential refinement, one trajectory rewritten R times.

Each rewrite reads only its own previous answer as the single reference,
through the same synthesis prompt as PaCoRe: PaCoRe with every width 1. It is
the depth-instead-of-breadth control at matched compute: R rewrites spend
R + 1 trajectories.
"""

from __future__ import annotations

from typing import Any

from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.llm.client import ChatClient
from pacore_graph.settings.config import PaCoReConfig

__all__ = ["build_refine_graph"]


def build_refine_graph(
    client: ChatClient, rewrites: int, *, config: PaCoReConfig | None = None, **kwargs: Any
) -> Any:
    """A first answer, then ``rewrites`` rounds that each rewrite the previous one."""
    if rewrites < 1:
        raise ValueError(f"refine needs at least 1 rewrite, got {rewrites}")
    cfg = (config or PaCoReConfig()).with_settings({"rounds": [1] * rewrites})
    return build_pacore_graph(client, config=cfg, name="refine", **kwargs)
