"""Method specs for ``pacore eval --methods``: what to compare, as typed.

- ``pacore:low`` / ``pacore:medium`` / ``pacore:high``: the paper's presets;
  ``pacore:8+2`` (or ``pacore:8,2``) any round widths.
- ``single``: one sample.
- ``majority:K``: self-consistency over K samples.
- ``refine:R``: one trajectory rewritten R times (sequential refinement).

Every method is a graph from :mod:`pacore_graph.graphs` over the same client
and records, so effective TTC is counted the same way for all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.graph.compaction import Compactor
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.graphs.refine import build_refine_graph
from pacore_graph.graphs.single import build_single_graph
from pacore_graph.llm.client import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PRESETS, PaCoReConfig

__all__ = ["FAMILIES", "MethodSpec", "build_method_graph", "parse_method", "parse_methods"]

FAMILIES = ("pacore", "single", "majority", "refine")


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodSpec:
    """A parsed method: ``text`` is the spec exactly as typed (the report's key)."""

    text: str
    family: str
    rounds: tuple[int, ...] = ()
    k: int = 1

    @property
    def expected_trajectories(self) -> int:
        """Model calls per problem (for planning a run's size)."""
        if self.family == "pacore":
            return sum(self.rounds) + 1
        if self.family == "refine":
            return self.k + 1
        return self.k


def _positive(text: str, what: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"method {spec!r}: {what} must be a positive integer, got {text!r}"
        ) from None
    if not 1 <= value <= MAX_ROUND_WIDTH:
        raise ValueError(f"method {spec!r}: {what} must be in [1, {MAX_ROUND_WIDTH}], got {value}")
    return value


def parse_method(text: str) -> MethodSpec:
    """Parse one spec; ValueError with the accepted forms when it is not one."""
    spec = text.strip()
    family, _, arg = spec.partition(":")
    if family == "pacore":
        if arg in PRESETS:
            return MethodSpec(text=spec, family="pacore", rounds=PRESETS[arg])
        parts = [p for p in re.split(r"[+,]", arg) if p]
        if not parts:
            raise ValueError(f"method {spec!r}: use pacore:low|medium|high or pacore:8+2")
        return MethodSpec(
            text=spec, family="pacore", rounds=tuple(_positive(p, "K", spec) for p in parts)
        )
    if family == "single" and not arg:
        return MethodSpec(text=spec, family="single", rounds=(1,), k=1)
    if family == "majority":
        k = _positive(arg, "K", spec)
        return MethodSpec(text=spec, family="majority", rounds=(k,), k=k)
    if family == "refine":
        r = _positive(arg, "R", spec)
        return MethodSpec(text=spec, family="refine", rounds=(1,) * r, k=r)
    raise ValueError(
        f"unknown method {spec!r}; use pacore:low|medium|high|8+2, single, majority:K or refine:R"
    )


def parse_methods(text: str) -> list[MethodSpec]:
    """Split a comma-separated list; ``pacore:8,2,single`` keeps ``8,2`` together."""
    parts = [p.strip(" ,") for p in re.split(r",(?=\s*[A-Za-z])", text) if p.strip(" ,")]
    if not parts:
        raise ValueError("--methods is empty; e.g. pacore:low,single,majority:4")
    specs = [parse_method(p) for p in parts]
    seen: set[str] = set()
    for s in specs:
        if s.text in seen:
            raise ValueError(f"method {s.text!r} is listed twice")
        seen.add(s.text)
    return specs


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
        cfg = PaCoReConfig.model_validate({**config.model_dump(), "rounds": list(spec.rounds)})
        return build_pacore_graph(client, config=cfg, **common)
    if spec.family == "single":
        return build_single_graph(client, config=config, **common)
    if spec.family == "majority":
        return build_majority_graph(client, spec.k, config=config, **common)
    if spec.family == "refine":
        return build_refine_graph(client, spec.k, config=config, **common)
    raise ValueError(f"unknown method family {spec.family!r}")  # pragma: no cover
