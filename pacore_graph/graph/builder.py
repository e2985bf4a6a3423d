"""``build_pacore_graph``: PaCoRe as a compiled LangGraph graph.

Topology (see ``tests/snapshots/pacore_graph.mmd``)::

    START -> prepare -> round --Send x K--> explore -> compact --+--> round (next)
                                                                 +--> finalize -> END

- ``prepare`` checks the problem and starts the run record.
- ``round`` renders P(x, M_{r-1}) once and fans out the round's K explorer
  tasks, each with its index and seed: one ``Send`` per explorer, or, for
  the plain chat explorer with ``n``-batching (the default), one ``Send``
  carrying all K (:class:`~pacore_graph.graph.explorer.ExploreGroup`), since its K
  samples are one ``n=K`` request and come back together.
- ``explore`` runs the explorer for one trajectory, or a group's K
  concurrently (see ``explorer.py``).
- ``compact`` is the fan-in: it applies the compactor to every trajectory,
  keeps the round, and routes to the next round or to ``finalize``.
- ``finalize`` returns the answer (the final K=1 round's message), the full
  :class:`~pacore_graph.graph.records.PaCoReResult`, and appends the answer to
  ``messages`` as an ``AIMessage``.

The builder validates everything (config, compactor, template, explorer)
once and hands the parts to :class:`~pacore_graph.graph.nodes.PaCoReNodes`, whose
methods are the nodes; the returned graph only runs.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.aggregation import Aggregator
from pacore_graph.graph.checkpoint_types import with_pacore_types
from pacore_graph.graph.compaction import Compactor, compactor_from_name
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.explorer import ChatExplorer, Explorer, GraphExplorer
from pacore_graph.graph.nodes import PaCoReNodes
from pacore_graph.graph.prompts import SYNTHESIS_TEMPLATE, render_synthesis
from pacore_graph.graph.records import PaCoReResult
from pacore_graph.graph.state import PaCoReInput, PaCoReOutput, PaCoReState
from pacore_graph.llm.batching import SampleBatcher, streams_samples
from pacore_graph.llm.client import ChatClient
from pacore_graph.otel.spans import RunTracer, TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.per_run import run_context_schema
from pacore_graph.settings.request_limits import RequestLimits

__all__ = [
    "ainvoke_pacore",
    "build_pacore_graph",
    "chat_explorer",
    "compile_topology",
    "resolve_compactor",
    "trace_options",
]


def resolve_compactor(compactor: Compactor | str, registry: CompactorRegistry) -> Compactor:
    """The graph's own compactor: a registered name, a built-in or (code's choice) module:attr."""
    if isinstance(compactor, str):
        resolved = (
            registry.resolve(compactor) if compactor in registry else compactor_from_name(compactor)
        )
    else:
        resolved = compactor
    if not callable(getattr(resolved, "compact", None)):
        raise TypeError(f"compactor {compactor!r} has no compact(trajectory) method")
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
    explore: Any = None,
    name: str,
    checkpointer: Any = None,
    compactor: str | None = None,
    extra_types: Iterable[type] = (),
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """PaCoRe's topology over ``nodes``: prepare, round, explore x K, compact, ..., finalize.

    Every PaCoRe-shaped graph is compiled here (the builder, and methods
    whose nodes subclass :class:`PaCoReNodes`): ``state_schema`` may extend
    the state, ``explore`` replaces the explore node (a subgraph explorer),
    ``compactor`` is the graph's compactor name shown as the context's
    default, ``extra_types`` are a method's own ``Send`` payloads, registered
    with the saver's serializer beside PaCoRe's.
    """
    builder = StateGraph(
        state_schema,
        context_schema=run_context_schema(nodes.config, compactor, nodes.limits),
        input_schema=PaCoReInput,
        output_schema=PaCoReOutput,
    )
    builder.add_node("prepare", nodes.prepare)  # fails before any span is opened
    builder.add_node("round", _guarded(nodes, nodes.round_node))
    builder.add_node("explore", explore or _guarded(nodes, nodes.explore))
    builder.add_node("compact", _guarded(nodes, nodes.compact))
    builder.add_node("finalize", _guarded(nodes, nodes.finalize))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "round")
    builder.add_conditional_edges("round", nodes.fan_out, ["explore"])
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


def _check_template(template: str) -> None:
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
    compactor: Compactor | str = "conclusion",
    explorer: Explorer | None = None,
    template: str = SYNTHESIS_TEMPLATE,
    limiter: SequenceLimiter | None = None,
    aggregator: Aggregator | None = None,
    tracing: TraceOptions | bool | None = None,
    name: str = "pacore",
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build and compile the PaCoRe graph.

    ``client`` is the model (any :class:`~pacore_graph.llm.client.ChatClient`);
    it may be omitted when a custom ``explorer`` brings its own. ``config``
    gives K, sampling, retries and the concurrency limit, which is shared by
    every problem this graph runs at once (pass ``limiter`` to share one
    across graphs). A custom ``explorer`` is held to the same limit, one unit
    per trajectory in flight, and receives the run's sampling settings with
    each task (``ExploreTask.params`` and ``seed``). The graph's input is
    ``{"messages": [...], "problem_id"?: str}``; its output adds ``answer``
    and ``result``.

    ``aggregator`` replaces the final K=1 synthesis round with another way of
    choosing the answer from the last configured round (the baselines in
    ``pacore_graph.graphs``: a single sample, a majority vote).

    ``tracing`` controls OpenTelemetry spans (see :mod:`pacore_graph.otel.spans`):
    by default the global tracer provider is used, which is a no-op until the
    user configures one; ``False`` turns span creation off entirely.

    ``checkpointer`` is any LangGraph saver (``InMemorySaver``, the SQLite or
    Postgres saver); PaCoRe's record types are registered with its
    serializer (:mod:`pacore_graph.graph.checkpoint_types`). Leave it ``None`` when the
    graph is a node of a checkpointed parent graph: it then checkpoints into
    the parent's saver (register the types there with
    :func:`~pacore_graph.graph.checkpoint_types.pacore_serde`).

    A run may change its shape through its LangGraph context
    (``ainvoke(state, context={"preset": "high"})``; the graph's
    ``context_schema``, see :mod:`pacore_graph.settings.per_run`), within ``limits`` (default
    :class:`~pacore_graph.settings.request_limits.RequestLimits`: 16 rounds, 4096
    samples, ``max_tokens`` 131072) and choosing its compactor among the
    built-ins and ``compactors`` (a ``{name: compactor}`` mapping or a
    :class:`~pacore_graph.graph.compactor_registry.CompactorRegistry`): a run's
    settings never import code. ``compactor`` itself, being the builder's
    choice, may also be ``module:attr``.
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
    _check_template(template)
    limiter = limiter or SequenceLimiter(cfg.max_concurrency)
    custom_limiter: SequenceLimiter | None = None
    if explorer is None:
        if client is None:
            raise ValueError("build_pacore_graph needs a client (or an explorer that brings one)")
        if not isinstance(client, ChatClient):
            raise TypeError(f"client must implement ChatClient.complete(...); got {client!r}")
        explorer = chat_explorer(client, limiter, cfg)
    elif not isinstance(explorer, Explorer):
        raise TypeError(
            f"explorer must have an async explore(task, config) method; got {explorer!r}"
        )
    elif not isinstance(explorer, ChatExplorer):
        # A custom explorer gets the limits too: one unit per trajectory in flight
        # (its sampling settings come with each task: ExploreTask.params and seed).
        custom_limiter = limiter
    if aggregator is not None and not isinstance(aggregator, Aggregator):
        raise TypeError(f"aggregator must have aggregate(rounds); got {aggregator!r}")
    model_name = getattr(client, "model", None)
    nodes = PaCoReNodes(
        config=cfg,
        compactor=compact_with,
        explorer=explorer,
        tracer=RunTracer(trace_options(tracing), config=cfg, model=model_name),
        aggregator=aggregator,
        template=template,
        model_name=model_name,
        explorer_name=None
        if isinstance(explorer, ChatExplorer)
        else str(getattr(explorer, "name", None) or type(explorer).__name__),
        name=name,
        limiter=custom_limiter,
        compactors=registry,
        limits=run_limits,
    )
    return compile_topology(
        nodes,
        explore=nodes.subgraph_explore(explorer) if isinstance(explorer, GraphExplorer) else None,
        name=name,
        checkpointer=checkpointer,
        compactor=compactor if isinstance(compactor, str) else None,
    )


def _guarded(nodes: PaCoReNodes, node: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
    """End the run's open spans with an error when a node raises, then re-raise.

    A plain ``async def`` (not a lambda or partial) so LangGraph sees the
    ``config`` parameter and the node keeps its own name in traces.
    """

    @functools.wraps(node)
    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            return await node(state, config)
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
