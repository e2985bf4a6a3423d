"""Assembling a method's graph on PaCoRe's shared nodes, when the method needs its own.

:func:`~pacore_graph.graph.builder.build_pacore_graph` builds the parts (the
chat explorer and its ``n``-batcher, the tracer, the compactor) and wires
:class:`~pacore_graph.graph.nodes.PaCoReNodes` into the PaCoRe topology. The
baselines need no more than its ``aggregator``; RSA and online DeepConf need
different *rounds* (one prompt per candidate; a confidence bar set by the
warm-up), so they subclass the nodes and override ``round_node`` and
``fan_out``. Everything else -- prepare, explore (spans, round gates,
progress events), compact, route, finalize (the record) -- is PaCoRe's own,
so the records, spans, checkpoints, stream events and effective TTC are the
same.

The builder takes no nodes class today, so the wiring is repeated here (the
same nodes, edges, names and recursion limit). When ``build_pacore_graph``
grows a ``nodes_class`` parameter this module shrinks to a call of it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.checkpoint_types import with_pacore_types
from pacore_graph.graph.compaction import Compactor, compactor_from_name
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.explorer import ChatExplorer
from pacore_graph.graph.nodes import PaCoReNodes
from pacore_graph.graph.state import PaCoReInput, PaCoReOutput
from pacore_graph.llm.batching import SampleBatcher, streams_samples
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import RunTracer, TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.request_limits import RequestLimits

__all__ = ["MethodParts", "compile_method_graph", "method_parts"]


class MethodParts:
    """What a method's nodes are built from, validated once (as the builder does)."""

    __slots__ = (
        "client",
        "compactor",
        "compactors",
        "config",
        "explorer",
        "limiter",
        "limits",
        "tracer",
    )

    def __init__(
        self,
        *,
        client: ChatClient,
        config: PaCoReConfig,
        compactor: Compactor,
        compactors: CompactorRegistry,
        explorer: ChatExplorer,
        limiter: SequenceLimiter,
        limits: RequestLimits,
        tracer: RunTracer,
    ) -> None:
        self.client = client
        self.config = config
        self.compactor = compactor
        self.compactors = compactors
        self.explorer = explorer
        self.limiter = limiter
        self.limits = limits
        self.tracer = tracer

    def node_kwargs(self) -> dict[str, Any]:
        """The keyword arguments every method's ``PaCoReNodes`` subclass shares."""
        return {
            "config": self.config,
            "compactor": self.compactor,
            "tracer": self.tracer,
            "model_name": getattr(self.client, "model", None),
            "explorer_name": None,  # chat spans, as the plain explorer's
            "limiter": None,  # the batcher (and a method's own calls) hold the limiter
            "compactors": self.compactors,
            "limits": self.limits,
        }


def method_parts(
    client: ChatClient,
    config: PaCoReConfig,
    *,
    compactor: Compactor | str = "conclusion",
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> MethodParts:
    """The builder's checks and parts for a method built on the chat explorer."""
    if not isinstance(client, ChatClient):
        raise TypeError(f"client must implement ChatClient.complete(...); got {client!r}")
    registry = CompactorRegistry.of(compactors)
    if isinstance(compactor, str):
        compact_with = (
            registry.resolve(compactor) if compactor in registry else compactor_from_name(compactor)
        )
    else:
        compact_with = compactor
    if not callable(getattr(compact_with, "compact", None)):
        raise TypeError(f"compactor {compactor!r} has no compact(trajectory) method")
    run_limits = limits if limits is not None else RequestLimits()
    limiter = limiter or SequenceLimiter(config.max_concurrency)
    # As the builder: straggler control needs each sample as it ends (a streamed n=K).
    round_control = config.round_quorum is not None or config.round_deadline is not None
    streamed = round_control and streams_samples(client)
    batcher = SampleBatcher(
        client,
        limiter,
        config.sampling,
        enabled=config.batch_samples and (streamed or not round_control),
        stream_samples=streamed,
    )
    options = (
        tracing if isinstance(tracing, TraceOptions) else TraceOptions(enabled=tracing is not False)
    )
    return MethodParts(
        client=client,
        config=config,
        compactor=compact_with,
        compactors=registry,
        explorer=ChatExplorer(batcher),
        limiter=limiter,
        limits=run_limits,
        tracer=RunTracer(options, config=config, model=getattr(client, "model", None)),
    )


def compile_method_graph(
    nodes: PaCoReNodes,
    state_schema: type[Any],
    *,
    name: str,
    checkpointer: Any = None,
    extra_types: Iterable[type] = (),
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """PaCoRe's topology over ``nodes``: prepare, round, explore x K, compact, ..., finalize.

    ``state_schema`` extends :class:`~pacore_graph.graph.state.PaCoReState` with
    the method's own keys; ``extra_types`` are the method's ``Send`` payloads,
    registered with the checkpointer's serializer beside PaCoRe's.
    """
    builder = StateGraph(state_schema, input_schema=PaCoReInput, output_schema=PaCoReOutput)
    builder.add_node("prepare", nodes.prepare)
    builder.add_node("round", _guarded(nodes, nodes.round_node))
    builder.add_node("explore", _guarded(nodes, nodes.explore))
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
    rounds = max(len(nodes.schedule), nodes.limits.max_rounds + 1)
    return graph.with_config(recursion_limit=3 * rounds + 10)


def _guarded(nodes: PaCoReNodes, node: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
    """End the run's open spans with an error when a node raises, then re-raise (as the builder)."""

    @functools.wraps(node)
    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            return await node(state, config)
        except BaseException as exc:
            nodes.fail_run(state, exc)
            raise

    return run
