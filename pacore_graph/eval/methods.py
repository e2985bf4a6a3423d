"""Method specs for ``pacore eval --methods``: what to compare, as typed.

- ``pacore:low`` / ``pacore:medium`` / ``pacore:high``: the paper's presets;
  ``pacore:8+2`` (or ``pacore:8,2``) any round widths.
- ``single``: one sample.
- ``majority:K``: self-consistency over K samples.
- ``refine:R``: one trajectory rewritten R times (sequential refinement).
- ``rsa:N,K,T``: RSA, N candidates each reading K of the previous N, T
  populations, a majority vote at the end (:mod:`pacore_graph.graphs.rsa`).
- ``deepconf:N`` / ``deepconf-online:N``: DeepConf offline and online
  (:mod:`pacore_graph.graphs.deepconf`); both ask the server for logprobs.

Every method is a graph from :mod:`pacore_graph.graphs` over the same client
and records, so effective TTC is counted the same way for all of them.
"""

from __future__ import annotations

from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.graph.compaction import Compactor
from pacore_graph.graphs.deepconf import build_deepconf_graph, build_deepconf_online_graph
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.graphs.refine import build_refine_graph
from pacore_graph.graphs.rsa import build_rsa_graph
from pacore_graph.graphs.single import build_single_graph
from pacore_graph.llm.client import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.grammar import METHODS, MethodSpec, parse_method, parse_methods

__all__ = ["FAMILIES", "MethodSpec", "build_method_graph", "parse_method", "parse_methods"]

#: The method families a spec may name (the grammar lives in :mod:`pacore_graph.settings.grammar`).
FAMILIES = tuple(METHODS)


def build_method_graph(
    spec: MethodSpec,
    client: ChatClient,
    *,
    config: PaCoReConfig,
    compactor: Compactor | str = "conclusion",
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
) -> Any:
    """The compiled graph for one method; ``config`` gives sampling, retries and limits."""
    common: dict[str, Any] = {"compactor": compactor, "limiter": limiter, "tracing": tracing}
    if spec.family == "pacore":
        cfg = config.with_settings({"rounds": list(spec.rounds)})
        return build_pacore_graph(client, config=cfg, **common)
    if spec.family == "single":
        return build_single_graph(client, config=config, **common)
    if spec.family == "majority":
        return build_majority_graph(client, spec.k, config=config, **common)
    if spec.family == "refine":
        return build_refine_graph(client, spec.k, config=config, **common)
    if spec.family == "rsa":
        n, t = spec.rounds[0], len(spec.rounds)
        return build_rsa_graph(client, n, spec.k, t, config=config, **common)
    if spec.family == "deepconf":
        return build_deepconf_graph(client, spec.k, config=config, **common)
    if spec.family == "deepconf-online":
        return build_deepconf_online_graph(client, spec.k, config=config, **common)
    raise ValueError(f"unknown method family {spec.family!r}")  # pragma: no cover
