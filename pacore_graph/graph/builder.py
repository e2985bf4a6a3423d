"""``build_pacore_graph``: PaCoRe, and every method built from its parts, as a compiled graph.

Topology (see ``tests/snapshots/pacore_graph.mmd``)::

    START -> prepare -> round --Send x K--> explore -> compact --+--> round (next)
                                                                 +--> finalize -> END

- ``prepare`` checks the problem and starts the run record.
- ``round`` asks the round plan for the round's prompts (PaCoRe's: P(x,
  M_{r-1}), rendered once) and fans out the round's K explorer tasks, each
  with its index and seed: one ``Send`` per explorer, or, for the plain chat
  explorer with ``n``-batching (the default), one ``Send`` carrying all K
  (:class:`~pacore_graph.graph.explorer.ExploreGroup`), since its K samples
  are one ``n=K`` request and come back together.
- ``explore`` runs the explorer for one trajectory, or a group's K
  concurrently (see ``explorer_parts.py``).
- ``compact`` is the fan-in: it applies the compactor to every trajectory,
  keeps the round, and routes to the next round or to ``finalize``.
- ``finalize`` returns the answer (the final K=1 round's message, or an
  aggregator's choice), the full
  :class:`~pacore_graph.values.records.PaCoReResult`, and appends the answer to
  ``messages`` as an ``AIMessage``.

An aggregator graph (``aggregator=`` a compiled graph) adds an ``aggregate``
node: the answer round is sent there instead of to ``explore``.

The builder validates everything (config, compactor, template, plan,
explorer, aggregator) once and hands the parts to
:class:`~pacore_graph.graph.nodes.PaCoReNodes`, whose methods are the nodes;
the returned graph only runs.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from pacore_graph.control.consensus import EarlyStop
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.checkpoint_types import with_pacore_types
from pacore_graph.graph.compact_step import compact_step
from pacore_graph.graph.explorer import ChatExplorer
from pacore_graph.graph.explorer_parts import ExplorerPart, aggregator_part, explorer_part
from pacore_graph.graph.nodes import AGGREGATE_NODE, PaCoReNodes
from pacore_graph.graph.plans import RoundPlan
from pacore_graph.graph.state import PaCoReInput, PaCoReOutput, PaCoReState
from pacore_graph.llm.batching import SampleBatcher, streams_samples
from pacore_graph.llm.complete_only import chat_client
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import RunTracer, TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.per_run import run_context_schema
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.aggregation import Aggregator
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor, compactor_from_name
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE, render_synthesis
from pacore_graph.values.records import PaCoReResult

__all__ = [
    "ainvoke_pacore",
    "build_pacore_graph",
    "chat_explorer",
    "check_template",
    "compile_topology",
    "resolve_compactor",
    "trace_options",
]


def resolve_compactor(compactor: Any, registry: CompactorRegistry) -> Any:
    """The graph's own compactor: a registered name, a built-in or (code's choice) module:attr,
    else the object given (a ``Compactor``, a function, an ``async`` function, a chat model;
    :func:`~pacore_graph.graph.compact_step.compact_step` checks it)."""
    if isinstance(compactor, str):
        resolved = (
            registry.resolve(compactor) if compactor in registry else compactor_from_name(compactor)
        )
    else:
        resolved = compactor
    compact_step(resolved)  # TypeError naming what is not a compactor
    return resolved


def chat_explorer(client: ChatClient, limiter: SequenceLimiter, cfg: PaCoReConfig) -> ChatExplorer:
    """The plain chat explorer over ``client``, its ``n``-batcher set for ``cfg``.

    A JSON n=K response returns its samples together: a quorum or deadline
    can cut stragglers only when each sample arrives on its own, i.e. a
    streamed n=K request (a client with stream_each), else one request per
    explorer.
    """
    round_control = cfg.round_quorum is not None or cfg.round_deadline is not None
    streamed = round_control and streams_samples(client)
    batcher = SampleBatcher(
        client,
        limiter,
        cfg.sampling,
        enabled=cfg.batch_samples and (streamed or not round_control),
        stream_samples=streamed,
    )
    return ChatExplorer(batcher)


def trace_options(tracing: TraceOptions | bool | None) -> TraceOptions:
    """``tracing`` as given, or on (the global provider) unless it is ``False``."""
    if isinstance(tracing, TraceOptions):
        return tracing
    return TraceOptions(enabled=tracing is not False)


def compile_topology(
    nodes: PaCoReNodes,
    *,
    state_schema: type[Any] = PaCoReState,
    name: str,
    checkpointer: Any = None,
    compactor: str | None = None,
    extra_types: Iterable[type] = (),
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """PaCoRe's topology over ``nodes``: prepare, round, explore x K, compact, ..., finalize.

    ``state_schema`` may extend the state, ``compactor`` is the graph's
    compactor name shown as the context's default, ``extra_types`` are
    types a part puts in the state or its ``Send`` payloads (``extras``),
    registered with the saver's serializer beside PaCoRe's.
    """
    builder = StateGraph(
        state_schema,
        context_schema=run_context_schema(nodes.config, compactor, nodes.limits),
        input_schema=PaCoReInput,
        output_schema=PaCoReOutput,
    )
    part = nodes.part
    explore = nodes.subgraph_explore(part) if part.graph is not None else nodes.explore
    builder.add_node("prepare", nodes.prepare)  # fails before any span is opened
    builder.add_node("round", _guarded(nodes, nodes.round_node))
    builder.add_node("explore", explore if part.graph is not None else _guarded(nodes, explore))
    targets = ["explore"]
    if nodes.answer is not None:
        builder.add_node(AGGREGATE_NODE, nodes.subgraph_explore(nodes.answer))
        builder.add_edge(AGGREGATE_NODE, "compact")
        targets.append(AGGREGATE_NODE)
    builder.add_node("compact", _guarded(nodes, nodes.compact))
    builder.add_node("finalize", _guarded(nodes, nodes.finalize))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "round")
    builder.add_conditional_edges("round", nodes.fan_out, targets)
    builder.add_edge("explore", "compact")
    builder.add_conditional_edges("compact", nodes.route, ["round", "finalize"])
    builder.add_edge("finalize", END)
    saver = with_pacore_types(checkpointer)
    extra = [(t.__module__, t.__name__) for t in extra_types]
    if extra and isinstance(saver, BaseCheckpointSaver):
        saver = saver.with_allowlist(extra)
    graph = builder.compile(name=name, checkpointer=saver)
    # Three steps per round plus prepare/finalize; LangGraph's default limit (25)
    # would stop a run of more than seven rounds. Per-run rounds are capped.
    rounds = max(len(nodes.schedule), nodes.limits.max_rounds + 1)
    return graph.with_config(recursion_limit=3 * rounds + 10)


def check_template(template: str) -> None:
    """ValueError for a synthesis template that does not render the problem and references."""
    if template is SYNTHESIS_TEMPLATE:
        return  # the packaged protocol text (tests render it); jinja2 loads on first use
    try:
        text = render_synthesis("PROBLEM", ["REF-A", "REF-B"], template)
    except Exception as exc:
        raise ValueError(f"synthesis template does not render: {exc}") from exc
    if "PROBLEM" not in text or "REF-A" not in text or "REF-B" not in text:
        raise ValueError(
            "synthesis template must use {{ original_prompt }} and loop over ref_responses"
        )


def build_pacore_graph(
    client: ChatClient | None = None,
    *,
    config: PaCoReConfig | Mapping[str, Any] | None = None,
    compactor: Compactor | Callable[..., Any] | str | Any = DEFAULT_COMPACTOR,
    explorer: Any = None,
    template: str = SYNTHESIS_TEMPLATE,
    plan: RoundPlan | None = None,
    limiter: SequenceLimiter | None = None,
    aggregator: Aggregator | Any = None,
    early_stop: EarlyStop | None = None,
    tracing: TraceOptions | bool | None = None,
    name: str = "pacore",
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
    extra_types: Iterable[type] = (),
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build and compile the PaCoRe graph, or any method made of its parts.

    The parts (each optional, each documented in ``docs/python.md``):

    - ``client``: the model (any :class:`~pacore_graph.llm.client.ChatClient`);
      it may be omitted when a custom ``explorer`` brings its own.
    - ``config``: K and each round's sampling and model (``rounds`` may hold
      :class:`~pacore_graph.settings.rounds.Round` values, ``final`` sets the
      answer round's), retries, the concurrency limit (shared by every
      problem this graph runs at once; pass ``limiter`` to share one across
      graphs or with your own explorer: a hold inside a hold of the same
      limiter takes nothing more, so they cannot deadlock).
    - ``explorer``: what answers each task: the chat explorer over ``client``
      by default; any compiled graph or Runnable with a ``messages`` state
      (``create_react_agent(...)`` as it is); a
      :class:`~pacore_graph.graph.explorer.GraphExplorer`; or anything with
      ``async explore(task, config) -> Trajectory``. A custom explorer is
      held to the limit, one unit per trajectory in flight, and receives the
      round's sampling with each task (``ExploreTask.params`` and ``seed``; a
      messages graph in ``config["configurable"]["pacore_sampling"]``).
    - ``compactor``: a name (``conclusion``, ``answer``, ``budget:N``, a
      registered one, or, being the builder's, ``module:attr``), an object
      with ``compact(trajectory)``, any function ``(Trajectory) -> str``
      (``async`` ones run concurrently), or a chat model (an LLM compactor).
    - ``plan``: what each round asks (:mod:`pacore_graph.graph.plans`); the
      default is PaCoRe's synthesis over ``template`` (the paper's prompt,
      byte for byte, unless given).
    - ``aggregator``: how the run answers instead of the K=1 synthesis round:
      a vote (an :class:`~pacore_graph.values.aggregation.Aggregator`: a single
      sample, a majority) or a graph that reads the last round's
      trajectories (``{"messages", "trajectories"}`` in, a messages state out).
    - ``early_stop``: ends a run after a round whose answers agree enough
      (default: the config's ``early_stop_consensus``, counted).

    The graph's input is ``{"messages": [...], "problem_id"?: str}``; its
    output adds ``answer`` and ``result``.

    ``tracing`` controls OpenTelemetry spans (see :mod:`pacore_graph.otel.spans`):
    by default the global tracer provider is used, which is a no-op until the
    user configures one; ``False`` turns span creation off entirely.

    ``checkpointer`` is any LangGraph saver (``InMemorySaver``, the SQLite or
    Postgres saver); PaCoRe's record types are registered with its
    serializer (:mod:`pacore_graph.graph.checkpoint_types`; ``extra_types``
    adds a part's own). Leave it ``None`` when the graph is a node of a
    checkpointed parent graph: it then checkpoints into the parent's saver
    (register the types there with
    :func:`~pacore_graph.graph.checkpoint_types.pacore_serde`).

    A run may change its shape through its LangGraph context
    (``ainvoke(state, context={"preset": "high"})``; inside a parent graph,
    under the context's ``pacore`` key; the graph's ``context_schema``, see
    :mod:`pacore_graph.settings.per_run`), within ``limits`` (default
    :class:`~pacore_graph.settings.request_limits.RequestLimits`: 16 rounds, 4096
    samples, ``max_tokens`` 131072) and choosing its compactor among the
    built-ins and ``compactors`` (a ``{name: compactor}`` mapping or a
    :class:`~pacore_graph.values.compactor_registry.CompactorRegistry`): a run's
    settings never import code.
    """
    cfg = (
        PaCoReConfig.model_validate(config or {})
        if not isinstance(config, PaCoReConfig)
        else config
    )
    registry = CompactorRegistry.of(compactors)
    run_limits = limits if limits is not None else RequestLimits()
    if not isinstance(run_limits, RequestLimits):
        raise TypeError(f"limits must be a RequestLimits; got {limits!r}")
    compact_with = resolve_compactor(compactor, registry)
    check_template(template)
    if plan is not None and not callable(plan):
        raise TypeError(f"plan must be a function of the round (RoundInput); got {plan!r}")
    if early_stop is not None and not isinstance(early_stop, EarlyStop):
        raise TypeError(f"early_stop must be an EarlyStop; got {early_stop!r}")
    limiter = limiter or SequenceLimiter(cfg.max_concurrency)
    if explorer is None:
        if client is None:
            raise ValueError("build_pacore_graph needs a client (or an explorer that brings one)")
        client = chat_client(client)  # TypeError naming what a client needs
        explorer = chat_explorer(client, limiter, cfg)
    part = explorer_part(explorer)
    vote: Aggregator | None = None
    answer: ExplorerPart | None = None
    answer_plan: RoundPlan | None = None
    if aggregator is not None:
        if isinstance(aggregator, Aggregator):
            vote = aggregator
        else:
            answer, graph_aggregator = aggregator_part(aggregator)
            answer_plan = graph_aggregator.plan
    model_name = getattr(client, "model", None)
    nodes = PaCoReNodes(
        config=cfg,
        compactor=compact_with,
        explorer=part,
        tracer=RunTracer(trace_options(tracing), config=cfg, model=model_name),
        aggregator=vote,
        answer=answer,
        answer_plan=answer_plan,
        plan=plan,
        template=template,
        model_name=model_name,
        name=name,
        limiter=limiter,
        compactors=registry,
        limits=run_limits,
        early_stop=early_stop,
    )
    return compile_topology(
        nodes,
        name=name,
        checkpointer=checkpointer,
        compactor=compactor if isinstance(compactor, str) else None,
        extra_types=extra_types,
    )


def _guarded(nodes: PaCoReNodes, node: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
    """End the run's open spans with an error when a node raises, then re-raise.

    A pause (LangGraph's ``GraphInterrupt``) is not an error: the spans stay
    as they are, and the resumed run goes on in the same trace. A plain
    ``async def`` (not a lambda or partial) so LangGraph sees the ``config``
    parameter and the node keeps its own name in traces.
    """

    @functools.wraps(node)
    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            return await node(state, config)
        except GraphBubbleUp:
            nodes.pause_run(state)
            raise
        except BaseException as exc:
            nodes.fail_run(state, exc)
            raise

    return run


async def ainvoke_pacore(
    graph: Any,
    problem: str | Sequence[Any],
    *,
    problem_id: str | None = None,
    config: RunnableConfig | None = None,
) -> PaCoReResult:
    """Run one problem (a question string or a conversation) and return its record."""
    messages = [{"role": "user", "content": problem}] if isinstance(problem, str) else list(problem)
    state: dict[str, Any] = {"messages": messages}
    if problem_id is not None:
        state["problem_id"] = problem_id
    out = await graph.ainvoke(state, config)
    result: PaCoReResult = out["result"]
    return result
