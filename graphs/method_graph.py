"""Assembling a method's graph on PaCoRe's shared nodes, when the method needs its own.

:func:`~pacore_graph.graph.builder.build_pacore_graph` builds the parts (the
chat explorer and its ``n``-batcher, the tracer, the compactor) and wires
:class:`~pacore_graph.graph.nodes.PaCoReNodes` into the PaCoRe topology. The
baselines need no more than its ``aggregator``; RSA and online DeepConf need
different *rounds* (one prompt per candidate; a confidence bar set by the
warm-up), so they subclass the nodes and override ``round_node`` and
``fan_out``. The methods that end in a vote build on
:class:`~pacore_graph.graph.vote_nodes.VoteNodes`, which runs the vote off
the event loop. Everything else -- prepare, explore (spans, round gates,
progress events), compact, route, finalize (the record) -- is PaCoRe's own,
so the records, spans, checkpoints, stream events and effective TTC are the
same.

The parts and the topology are the builder's own functions
(:func:`~pacore_graph.graph.builder.chat_explorer`,
:func:`~pacore_graph.graph.builder.compile_topology`, ...): only the nodes
class differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import (
    chat_explorer,
    compile_topology,
    resolve_compactor,
    trace_options,
)
from pacore_graph.graph.compaction import Compactor
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.explorer import ChatExplorer
from pacore_graph.graph.nodes import PaCoReNodes
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
    limiter = limiter or SequenceLimiter(config.max_concurrency)
    return MethodParts(
        client=client,
        config=config,
        compactor=resolve_compactor(compactor, registry),
        compactors=registry,
        explorer=chat_explorer(client, limiter, config),
        limiter=limiter,
        limits=limits if limits is not None else RequestLimits(),
        tracer=RunTracer(
            trace_options(tracing), config=config, model=getattr(client, "model", None)
        ),
    )


def compile_method_graph(
    nodes: PaCoReNodes,
    state_schema: type[Any],
    *,
    name: str,
    checkpointer: Any = None,
    extra_types: Iterable[type] = (),
    compactor: str | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """PaCoRe's topology over ``nodes``: prepare, round, explore x K, compact, ..., finalize.

    ``state_schema`` extends :class:`~pacore_graph.graph.state.PaCoReState` with
    the method's own keys; ``extra_types`` are the method's ``Send`` payloads,
    registered with the checkpointer's serializer beside PaCoRe's;
    ``compactor`` is the compactor's name the context schema shows as its
    default (as the builder's).
    """
    return compile_topology(
        nodes,
        state_schema=state_schema,
        name=name,
        checkpointer=checkpointer,
        extra_types=extra_types,
        compactor=compactor,
    )
