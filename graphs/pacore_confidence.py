"""PaCoRe with confidence: only the most confident share of a round goes on, votes weighed.

Two options none of the method's anchors has (issue 21, part 3), both off by
default because they change what the model sees or when a run stops:

- ``reference_filter`` (``--reference-filter confidence:F[,W]``): a
  synthesis round's references are only the share F of the previous round's
  trajectories with the highest lowest group confidence
  (:func:`~pacore_graph.control.confidence.most_confident`), then ordered by
  the usual reference rule; the run's ``round_control`` notes say which
  trajectories were passed on;
- ``consensus_by_confidence`` (``--consensus-weight confidence``):
  ``early_stop_consensus`` weighs each vote by the trajectory's lowest group
  confidence (:func:`~pacore_graph.control.confidence.confidence_consensus`).

Both need token log-probabilities: the run asks for ``logprobs`` with
``top_logprobs``. It is PaCoRe's own builder with two parts changed: the
round plan (:class:`ConfidencePlan`, the synthesis plan over the filtered
round) and the early stop (:class:`ConfidenceEarlyStop`); records, spans,
checkpoints and stream events are PaCoRe's. Both are settings of the run's
config (``reference_filter``, ``consensus_weight``), so
:func:`build_pacore_for_config` -- what ``pacore eval``'s ``pacore:...``
methods build, and ``pacore run`` when either is set -- picks this graph
exactly when the config asks for either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pacore_graph.control.confidence import (
    DEFAULT_TOP_LOGPROBS,
    DEFAULT_WINDOW,
    ConfidenceFilter,
    confidence_consensus,
    parse_reference_filter,
)
from pacore_graph.control.consensus import Consensus, EarlyStop
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import build_pacore_graph, check_template
from pacore_graph.graph.plans import RoundInput, RoundPrompts, SynthesisPlan
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE
from pacore_graph.values.records import Trajectory

__all__ = [
    "ConfidenceEarlyStop",
    "ConfidencePlan",
    "build_pacore_confidence_graph",
    "build_pacore_for_config",
    "wants_confidence",
]


@dataclass(frozen=True, slots=True)
class ConfidenceEarlyStop(EarlyStop):
    """``--early-stop-consensus`` with each vote weighed by its confidence."""

    window: int = DEFAULT_WINDOW

    def check(self, trajectories: Sequence[Trajectory]) -> Consensus | None:
        if len(trajectories) < 2:
            return None
        found = confidence_consensus(trajectories, self.window, self.extract)
        if found.trajectory is None or found.share < self.threshold:
            return None
        counts: dict[str, int] = {}
        for t in trajectories:
            answer = None if t.failed else self.extract(t.content)
            if answer:
                counts[answer] = counts.get(answer, 0) + 1
        return Consensus(
            answer=found.answer, share=found.share, trajectory=found.trajectory, votes=counts
        )


@dataclass(frozen=True, slots=True)
class ConfidencePlan:
    """PaCoRe's synthesis plan over only the most confident share of the previous round.

    Round 0 asks the problem; a later round's references are ``filter``'s
    share (:meth:`~pacore_graph.control.confidence.ConfidenceFilter.apply`),
    then ordered by ``synthesis``'s rule. The round's note says which
    trajectories were passed on.
    """

    filter: ConfidenceFilter
    synthesis: SynthesisPlan = field(default_factory=SynthesisPlan)

    def __call__(self, round: RoundInput, /) -> RoundPrompts:
        if round.round == 0 or not round.rounds:
            return self.synthesis(round)
        kept = tuple(self.filter.apply(round.previous))
        planned = self.synthesis(replace(round, rounds=(*round.rounds[:-1], kept)))
        note = {
            "reference_filter": self.filter.spec,
            "passed": [t.id for t in kept if not t.failed],
        }
        return replace(planned, note=note)


def wants_confidence(config: PaCoReConfig) -> bool:
    """Whether ``config`` asks for a confidence option PaCoRe's plain graph does not have
    (:attr:`~pacore_graph.settings.config.PaCoReConfig.asks_confidence`)."""
    return config.asks_confidence


def build_pacore_confidence_graph(
    client: ChatClient,
    *,
    config: PaCoReConfig | None = None,
    reference_filter: ConfidenceFilter | str | None = None,
    consensus_by_confidence: bool | None = None,
    window: int | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    template: str = SYNTHESIS_TEMPLATE,
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> Any:
    """PaCoRe with ``reference_filter`` (``confidence:F[,W]``) and/or confidence-weighed stops.

    Either left ``None`` is the config's own (``reference_filter``,
    ``consensus_weight == "confidence"``). ``window`` is the one the
    weighed votes judge by: the filter's W when a filter is given, else
    DeepConf's 2,048 tokens. ``template`` is the synthesis prompt, as for
    :func:`~pacore_graph.graph.builder.build_pacore_graph`.
    """
    base = config or PaCoReConfig()
    chosen_filter = base.reference_filter if reference_filter is None else reference_filter
    chosen = (
        parse_reference_filter(chosen_filter) if isinstance(chosen_filter, str) else chosen_filter
    )
    weighed = (
        base.consensus_weight == "confidence"
        if consensus_by_confidence is None
        else consensus_by_confidence
    )
    if window is None:
        window = chosen.window if chosen is not None else DEFAULT_WINDOW
    check_template(template)
    cfg = base.model_copy(update={"sampling": base.sampling.with_logprobs(top_logprobs)})
    synthesis = SynthesisPlan(template, cfg.shuffle_seed, cfg.reference_order)
    stop = (
        ConfidenceEarlyStop(cfg.early_stop_consensus, window=window)
        if weighed and cfg.early_stop_consensus is not None
        else None
    )
    return build_pacore_graph(
        client,
        config=cfg,
        plan=ConfidencePlan(chosen, synthesis) if chosen is not None else synthesis,
        early_stop=stop,
        compactor=compactor,
        template=template,
        limiter=limiter,
        tracing=tracing,
        name="pacore",
        checkpointer=checkpointer,
        compactors=compactors,
        limits=limits,
    )


def build_pacore_for_config(
    client: ChatClient,
    *,
    config: PaCoReConfig,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    template: str = SYNTHESIS_TEMPLATE,
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> Any:
    """The PaCoRe graph ``config`` describes: with confidence when it asks, else the plain one.

    One place decides, so ``pacore run`` (a question or ``--input``) and
    ``pacore eval``'s ``pacore:...`` methods build the same graph for the same
    settings (a served graph reading ``PACORE_REFERENCE_FILTER`` would too);
    the plain graph is untouched (no log-probabilities asked) when neither
    confidence option is set. The keywords are the builder's.
    """
    common: dict[str, Any] = {
        "config": config,
        "compactor": compactor,
        "template": template,
        "limiter": limiter,
        "tracing": tracing,
        "checkpointer": checkpointer,
        "compactors": compactors,
        "limits": limits,
    }
    if wants_confidence(config):
        return build_pacore_confidence_graph(client, **common)
    return build_pacore_graph(client, **common)
