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
``top_logprobs``. It is PaCoRe's own graph with the round node (and the
early stop) overridden; records, spans, checkpoints and stream events are
PaCoRe's. Both are settings of the run's config (``reference_filter``,
``consensus_weight``), so :func:`build_pacore_for_config` -- what ``pacore
run`` and ``pacore eval``'s ``pacore:...`` methods build -- picks this graph
exactly when the config asks for either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig

from pacore_graph.control.confidence import (
    DEFAULT_TOP_LOGPROBS,
    DEFAULT_WINDOW,
    ConfidenceFilter,
    confidence_consensus,
    parse_reference_filter,
)
from pacore_graph.control.consensus import Consensus, EarlyStop
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.aggregation import extract_final_answer
from pacore_graph.graph.builder import _check_template, build_pacore_graph
from pacore_graph.graph.compaction import Compactor
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.nodes import PaCoReNodes
from pacore_graph.graph.prompts import SYNTHESIS_TEMPLATE, select_references, synthesis_messages
from pacore_graph.graph.records import Trajectory
from pacore_graph.graph.state import PaCoReState
from pacore_graph.graph.streaming import progress_writer, round_started
from pacore_graph.graphs.deepconf import confidence_sampling
from pacore_graph.graphs.method_graph import compile_method_graph, method_parts
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.request_limits import RequestLimits

__all__ = [
    "ConfidenceEarlyStop",
    "ConfidencePaCoReNodes",
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


@dataclass(slots=True, kw_only=True)
class ConfidencePaCoReNodes(PaCoReNodes):
    """PaCoRe's nodes whose synthesis rounds read only the most confident share."""

    reference_filter: ConfidenceFilter | None = None
    consensus_window: int | None = None
    extract: Callable[[str], str | None] = field(default=extract_final_answer)

    def __post_init__(self) -> None:
        PaCoReNodes.__post_init__(self)
        if self.consensus_window is not None and self.early_stop is not None:
            self.early_stop = ConfidenceEarlyStop(
                self.early_stop.threshold, self.extract, self.consensus_window
            )

    async def round_node(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """PaCoRe's round node, with the previous round filtered before the reference rule."""
        r = state["round"]
        if r == 0 or self.reference_filter is None:
            return await PaCoReNodes.round_node(self, state, config)
        width, reason = self._width(state)
        if self.quorum.enabled:
            self._gates[(state["run_id"], r)] = self.quorum.gate(width)
        progress_writer()(round_started(r, width))
        kept = self.reference_filter.apply(state["rounds"][-1])
        refs, texts = select_references(kept, self.config.shuffle_seed, self.config.reference_order)
        prompt = synthesis_messages(state["conversation"], texts, self.template)
        self.tracer.start_round(state["run_id"], r, width, texts)
        note = {
            "round": r,
            "reference_filter": self.reference_filter.spec,
            "passed": [t.id for t in kept if not t.failed],
        }
        return {
            "prompt": tuple(prompt),
            "prompt_refs": refs,
            "width": width,
            "width_reason": reason,
            "control": (*(state.get("control") or ()), note),
        }


def wants_confidence(config: PaCoReConfig) -> bool:
    """Whether ``config`` asks for a confidence option PaCoRe's plain graph does not have.

    A confidence weight without ``early_stop_consensus`` weighs nothing, so
    it alone does not ask for log-probabilities.
    """
    weighed = config.consensus_weight == "confidence" and config.early_stop_consensus is not None
    return config.reference_filter is not None or weighed


def build_pacore_confidence_graph(
    client: ChatClient,
    *,
    config: PaCoReConfig | None = None,
    reference_filter: ConfidenceFilter | str | None = None,
    consensus_by_confidence: bool | None = None,
    window: int | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    compactor: Compactor | str = "conclusion",
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
    _check_template(template)
    cfg = base.model_copy(update={"sampling": confidence_sampling(base.sampling, top_logprobs)})
    parts = method_parts(
        client,
        cfg,
        compactor=compactor,
        limiter=limiter,
        tracing=tracing,
        compactors=compactors,
        limits=limits,
    )
    nodes = ConfidencePaCoReNodes(
        **parts.node_kwargs(),
        explorer=parts.explorer,
        template=template,
        reference_filter=chosen,
        consensus_window=window if weighed else None,
    )
    return compile_method_graph(nodes, PaCoReState, name="pacore", checkpointer=checkpointer)


def build_pacore_for_config(
    client: ChatClient,
    *,
    config: PaCoReConfig,
    compactor: Compactor | str = "conclusion",
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
