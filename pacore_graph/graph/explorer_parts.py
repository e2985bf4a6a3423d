"""What ``explorer=`` may be, and how the graph's nodes run each kind.

:func:`explorer_part` turns what a user gives into one :class:`ExplorerPart`,
so the nodes run every kind the same way (spans, round gates, limits,
failures, the journal):

- nothing (the builder's chat explorer,
  :class:`~pacore_graph.graph.explorer.ChatExplorer`): a round goes to
  LangGraph as one ``Send`` (:class:`~pacore_graph.graph.explorer.ExploreGroup`)
  and its explorers share one ``n=K`` request, sent by the node
  (:meth:`~pacore_graph.graph.explorer.ChatExplorer.explore_round`);
- an explorer with a :class:`~pacore_graph.llm.batching.SampleBatcher`
  (``batcher``): its calls are ``n``-batched by the batcher and hold the
  limiter themselves, so its round is one ``Send`` too;
- an object with ``async explore(task, config) -> Trajectory``
  (:class:`~pacore_graph.graph.explorer.Explorer`);
- a :class:`~pacore_graph.graph.explorer.GraphExplorer` (``{"task"}`` in,
  ``{"trajectory"}`` out), or a compiled graph with that input;
- a compiled graph, Runnable or chat model with a ``messages`` state
  (:class:`~pacore_graph.graph.messages_explorer.MessagesExplorer`), e.g.
  ``create_react_agent(...)`` as it is.

The last three get one ``Send`` per explorer and one limiter unit per
trajectory in flight; a compiled graph runs as the ``explore`` node's real
subgraph.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from pacore_graph.graph.explorer import (
    ChatExplorer,
    Explorer,
    ExploreTask,
    GraphExplorer,
    OneExplorer,
)
from pacore_graph.graph.messages_explorer import MessagesAggregator, MessagesExplorer
from pacore_graph.llm.batching import SampleBatcher
from pacore_graph.values.records import Trajectory

__all__ = ["ExplorerPart", "aggregator_part", "explorer_part"]

RunGraph = Callable[[Any, ExploreTask, RunnableConfig], Awaitable[Trajectory]]
RunRound = Callable[
    [Sequence[ExploreTask], RunnableConfig, OneExplorer], Awaitable[list[Trajectory]]
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplorerPart:
    """One kind of explorer as the nodes run it.

    ``run(graph, task, config)`` makes one trajectory (it may raise: the
    node records the failure); ``graph`` is the compiled graph the node
    passes it (and so runs as its subgraph), or None. ``name`` names the
    explorer's span (``invoke_agent {name}``; None: a ``chat`` span). A
    ``grouped`` explorer's round is one ``Send`` and it holds the limiter
    itself; ``run_round(tasks, config, each)``, when set, runs such a
    round's explorers together (the chat explorer's one ``n=K`` request),
    ``each`` being the node's wrapper of one explorer's call. ``messages``
    explorers get the round's sampling in their config.
    """

    run: RunGraph
    name: str | None
    grouped: bool = False
    run_round: RunRound | None = None
    holds_limits: bool = False
    graph: Any = None
    release: Callable[[ExploreTask], Awaitable[None]] | None = None
    messages: bool = False


def _input_keys(graph: Any) -> set[str]:
    """The keys of a compiled graph's input state (empty when it cannot say)."""
    builder = getattr(graph, "builder", None)  # a compiled StateGraph: its input schema's keys
    schema = getattr(builder, "input_schema", None)
    schemas = getattr(builder, "schemas", None)
    if schema is not None and isinstance(schemas, dict) and schema in schemas:
        return {str(key) for key in schemas[schema]}
    try:
        schema = graph.get_input_jsonschema()
    except Exception:  # a graph whose schema cannot be rendered
        return set()
    props = schema.get("properties") if isinstance(schema, dict) else None
    return set(props) if isinstance(props, dict) else set()


def _graph_explorer(explorer: GraphExplorer) -> ExplorerPart:
    async def run(graph: Any, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        return explorer.trajectory_of(await graph.ainvoke({"task": task}, config))

    return ExplorerPart(run=run, name=explorer.name, graph=explorer.graph, release=explorer.release)


def _messages_explorer(explorer: MessagesExplorer) -> ExplorerPart:
    return ExplorerPart(
        run=explorer.run,
        name=explorer.name,
        graph=explorer.graph if explorer.graph is not None else explorer.runnable,
        messages=True,
    )


def explorer_part(explorer: Any) -> ExplorerPart:
    """How to run ``explorer`` (see the module docstring); TypeError for what none of them is."""
    if isinstance(explorer, ExplorerPart):
        return explorer
    if isinstance(explorer, ChatExplorer):
        chat = explorer

        async def run_chat(_: Any, task: ExploreTask, config: RunnableConfig) -> Trajectory:
            return await chat.explore(task, config)

        grouped = chat.batcher.enabled
        return ExplorerPart(
            run=run_chat,
            name=None,
            grouped=grouped,
            holds_limits=True,
            run_round=chat.explore_round if grouped else None,
        )
    batcher = getattr(explorer, "batcher", None)
    if isinstance(explorer, Explorer) and isinstance(batcher, SampleBatcher):
        explore = explorer.explore

        async def run_batched(_: Any, task: ExploreTask, config: RunnableConfig) -> Trajectory:
            return await explore(task, config)

        return ExplorerPart(run=run_batched, name=None, grouped=batcher.enabled, holds_limits=True)
    if isinstance(explorer, GraphExplorer):
        return _graph_explorer(explorer)
    if isinstance(explorer, MessagesExplorer):
        return _messages_explorer(explorer)
    if isinstance(explorer, Explorer):
        explore = explorer.explore

        async def run(_: Any, task: ExploreTask, config: RunnableConfig) -> Trajectory:
            return await explore(task, config)

        name = str(getattr(explorer, "name", None) or type(explorer).__name__)
        return ExplorerPart(run=run, name=name)
    if isinstance(explorer, Runnable):
        from langgraph.pregel import Pregel

        if isinstance(explorer, Pregel):
            keys = _input_keys(explorer)
            if "task" in keys and "messages" not in keys:
                return _graph_explorer(GraphExplorer(explorer))
        return _messages_explorer(MessagesExplorer(explorer))
    raise TypeError(
        "explorer must be a compiled graph or Runnable with a 'messages' state "
        "(e.g. create_react_agent(...)), a GraphExplorer, or have an async "
        f"explore(task, config) method; got {explorer!r}"
    )


def aggregator_part(aggregator: Any) -> tuple[ExplorerPart, MessagesAggregator]:
    """A graph aggregator (a compiled graph or Runnable reading ``messages`` and
    ``trajectories``) as the answer round's explorer, and its plan."""
    from langchain_core.language_models import BaseLanguageModel

    if isinstance(aggregator, MessagesAggregator):
        found = aggregator
    elif isinstance(aggregator, BaseLanguageModel):
        raise TypeError(
            "a chat model cannot be the aggregator: it cannot read the trajectories; give a "
            "graph (its input is {'messages': [...], 'trajectories': (...)}) or a vote"
        )
    elif isinstance(aggregator, Runnable):
        found = MessagesAggregator(aggregator)
    else:
        raise TypeError(
            "aggregator must have aggregate(rounds) (a vote, e.g. MajorityVote()) or be a "
            "compiled graph or Runnable that reads 'messages' and 'trajectories'; "
            f"got {aggregator!r}"
        )
    return _messages_explorer(found), found
