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
- ``aggagent:N``: N samples, then an aggregator agent that lists, reads and
  searches them with tools before it answers (:mod:`pacore_graph.graphs.aggagent`).

Every method is a graph from :mod:`pacore_graph.graphs` over the same client
and records, so effective TTC is counted the same way for all of them.

The methods' own settings ride in the run config, so every spec of one eval
gets the same: ``rsa_final`` (``--rsa-final``) for the rsa specs,
``deepconf_keep`` / ``deepconf_window`` for the deepconf ones, and
``reference_filter`` / ``consensus_weight`` for the pacore ones (which then
build :func:`~pacore_graph.graphs.pacore_confidence.build_pacore_for_config`'s
confidence graph). :func:`method_settings` says which applied, for the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graphs.aggagent import build_aggagent_graph
from pacore_graph.graphs.deepconf import (
    DEFAULT_KEEP,
    DEFAULT_SHARE,
    build_deepconf_graph,
    build_deepconf_online_graph,
)
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.graphs.pacore_confidence import build_pacore_for_config, wants_confidence
from pacore_graph.graphs.refine import build_refine_graph
from pacore_graph.graphs.rsa import build_rsa_graph
from pacore_graph.graphs.single import build_single_graph
from pacore_graph.llm.client import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.grammar import METHODS, MethodSpec, parse_method, parse_methods
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor
from pacore_graph.values.compactor_registry import CompactorRegistry

__all__ = [
    "FAMILIES",
    "MethodSpec",
    "build_method_graph",
    "method_settings",
    "parse_method",
    "parse_methods",
]

#: The method families a spec may name (the grammar lives in :mod:`pacore_graph.settings.grammar`).
FAMILIES = tuple(METHODS)


def build_method_graph(
    spec: MethodSpec,
    client: ChatClient,
    *,
    config: PaCoReConfig,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> Any:
    """The compiled graph for one method.

    ``config`` gives sampling, retries and limits, and the methods' own
    settings (see the module docstring): each graph reads those of its family.
    ``compactors`` and ``limits`` are what a run's context may ask for (a
    server's registered compactors and per-request caps), as for PaCoRe's
    builder, so every method honours them alike.
    """
    common: dict[str, Any] = {
        "compactor": compactor,
        "limiter": limiter,
        "tracing": tracing,
        "compactors": compactors,
        "limits": limits,
    }
    if spec.family == "pacore":
        cfg = config.with_settings({"rounds": list(spec.rounds)})
        return build_pacore_for_config(client, config=cfg, **common)
    if spec.family == "single":
        return build_single_graph(client, config=config, **common)
    if spec.family == "majority":
        return build_majority_graph(client, spec.k, config=config, **common)
    if spec.family == "refine":
        return build_refine_graph(client, spec.k, config=config, **common)
    if spec.family == "rsa":
        n, t = spec.rounds[0], len(spec.rounds)
        return build_rsa_graph(
            client, n, spec.k, t, config=config, final=config.rsa_final, **common
        )
    if spec.family == "deepconf":
        return build_deepconf_graph(client, spec.k, config=config, **common)
    if spec.family == "deepconf-online":
        return build_deepconf_online_graph(client, spec.k, config=config, **common)
    if spec.family == "aggagent":
        return build_aggagent_graph(client, spec.k, config=config, **common)
    raise ValueError(f"unknown method family {spec.family!r}")  # pragma: no cover


def method_settings(methods: Sequence[MethodSpec], config: PaCoReConfig) -> dict[str, Any]:
    """The methods' own settings that ``methods`` ran with, for an eval's report.

    Only those some listed method reads, so two evals that differ in one
    (``rsa_final`` majority vs aggregate) are told apart by their reports,
    and a report lists nothing that changed nothing. PaCoRe's confidence
    options appear only when set (they are off by default).
    """
    families = {m.family for m in methods}
    out: dict[str, Any] = {}
    if "pacore" in families and wants_confidence(config):
        if config.reference_filter is not None:
            out["reference_filter"] = config.reference_filter
        if config.consensus_weight != "count" and config.early_stop_consensus is not None:
            out["consensus_weight"] = config.consensus_weight
    if "rsa" in families:
        out["rsa_final"] = config.rsa_final
    deepconf = sorted(families & {"deepconf", "deepconf-online"})
    if deepconf:
        if config.deepconf_keep is not None:
            out["deepconf_keep"] = config.deepconf_keep
        else:  # each family's own default: a number when one family ran
            defaults = {"deepconf": DEFAULT_SHARE, "deepconf-online": DEFAULT_KEEP}
            shown = [f"{defaults[f]} ({f})" for f in deepconf]
            out["deepconf_keep"] = defaults[deepconf[0]] if len(deepconf) == 1 else ", ".join(shown)
        out["deepconf_window"] = config.deepconf_window
    return out
