"""``aggagent:N``: N explorers in one round (one ``n=N`` request), then the aggregator agent.

The method ``pacore eval``, ``pacore run --method`` and a ``pacore serve``
model name run: PaCoRe's explorer round of width N, exactly as
``majority:N`` runs it (the same fan-out, ``n``-batching and records), then,
instead of a vote or a K=1 synthesis, the agent of
:mod:`pacore_graph.graphs.aggagent` reads the N trajectories with its tools
and answers. The agent's step is the run's final round, of width 1: its
trajectory (the answer's text and reasoning, the tokens of all its calls,
its tool calls as ``ToolCallRecord``) is the last round of the
``PaCoReResult``, so effective TTC, the message graph and the records count
it like PaCoRe's synthesis round.

**An adapter, to be deleted.** Issue 32 makes any compiled graph an
aggregator of ``build_pacore_graph`` (the aggregator-graph contract, built
beside this). Until that seam is in the builder, this module wires the agent
by hand: an outer graph whose ``explore`` node runs the explorer round (a
PaCoRe graph that stops after it) and whose ``aggregate`` node runs the
agent and builds the final record. Once the seam lands,
:func:`build_aggagent_graph` becomes ``build_pacore_graph(client, rounds=[n],
aggregator=build_aggregator_agent(...))`` and the rest of this module goes.
What the adapter lacks meanwhile: the run is not traced (the inner round's
root span would end with a placeholder answer, so tracing is off rather than
wrong), the explorer round's progress events (``stream_mode="custom"``) are
sent when the round is over rather than as each explorer finishes, and the
agent's tokens do not stream in ``messages`` mode (the answer arrives whole).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import RoundFailedError
from pacore_graph.graph.aggregation import FirstAnswer
from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.graph.compaction import Compactor
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.graph.records import PaCoReResult, ToolCallRecord, Trajectory
from pacore_graph.graph.state import PaCoReInput, PaCoReOutput
from pacore_graph.graph.streaming import (
    answer_message_id,
    explorer_finished,
    progress_writer,
    round_compacted,
    round_started,
)
from pacore_graph.graphs.aggagent import (
    DEFAULT_MAX_TOOL_STEPS,
    SAMPLING_KEY,
    build_aggregator_agent,
)
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.tools.trajectories import TrajectoryToolLimits

__all__ = ["AGGREGATOR_NAME", "agent_trajectory", "build_aggagent_graph"]

#: ``result.extra["aggregator"]`` of an aggagent run.
AGGREGATOR_NAME = "aggagent"


class _State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    problem_id: str
    answer: str
    result: PaCoReResult
    explored: PaCoReResult


def _tool_records(messages: Sequence[BaseMessage]) -> tuple[ToolCallRecord, ...]:
    """Each tool call of the AI messages with the result its ToolMessage carried."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    records: list[ToolCallRecord] = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            result = results.get(call.get("id") or "")
            output = str(result.text) if result is not None else ""
            failed = result is None or result.status == "error"
            records.append(
                ToolCallRecord(
                    name=call["name"],
                    arguments=call.get("args") or {},
                    output=output,
                    error=(output or "no result") if failed else None,
                )
            )
    return tuple(records)


def agent_trajectory(
    messages: Sequence[BaseMessage],
    *,
    round_index: int,
    references: tuple[int, ...],
    latency_s: float,
) -> Trajectory:
    """The final step's record from the agent's own messages (the contract's rule).

    ``content`` is the last AI message's text, ``reasoning`` its
    ``reasoning_content``; the tokens are summed over every AI message's
    ``usage_metadata``; the tool calls are recorded with their results.
    """
    replies = [m for m in messages if isinstance(m, AIMessage)]
    if not replies:
        raise ValueError("the aggregator graph returned no AI message to answer with")
    answer = replies[-1]
    usage: list[Mapping[str, Any]] = [dict(m.usage_metadata or {}) for m in replies]
    reasoning = answer.additional_kwargs.get("reasoning_content") or answer.additional_kwargs.get(
        "reasoning"
    )
    return Trajectory(
        round=round_index,
        index=0,
        content=answer.text,
        reasoning=str(reasoning) if reasoning else None,
        message=answer.text,
        finish_reason=(answer.response_metadata or {}).get("finish_reason"),
        prompt_tokens=sum(int(u.get("input_tokens", 0)) for u in usage),
        completion_tokens=sum(int(u.get("output_tokens", 0)) for u in usage),
        latency_s=latency_s,
        references=references,
        tool_calls=_tool_records(messages),
    )


class _Nodes:
    def __init__(self, explorers: Any, agent: Any, name: str) -> None:
        self.explorers = explorers
        self.agent = agent
        self.name = name

    async def explore(self, state: _State, config: RunnableConfig) -> dict[str, Any]:
        """The explorer round: a PaCoRe graph of one round that stops there."""
        given: dict[str, Any] = {"messages": state["messages"]}
        if state.get("problem_id") is not None:
            given["problem_id"] = state["problem_id"]
        out = await self.explorers.ainvoke(given, config)
        result: PaCoReResult = out["result"]
        # The inner graph's progress stays in its own stream: told again here, once it is over.
        write = progress_writer()
        for r, trajectories in enumerate(result.rounds):
            write(round_started(r, len(trajectories)))
            for t in trajectories:
                write(explorer_finished(t))
            write(round_compacted(r, trajectories))
        return {"explored": result}

    async def aggregate(self, state: _State, config: RunnableConfig) -> dict[str, Any]:
        """The agent over the round's trajectories; its step becomes the final round."""
        explored = state["explored"]
        last = tuple(sorted(explored.rounds[-1], key=lambda t: t.index))
        r = len(explored.rounds)
        write = progress_writer()
        write(round_started(r, 1))
        conversation = list(state["messages"])
        sampling = explored.extra.get("sampling")
        configurable = {**(config.get("configurable") or {})}
        if isinstance(sampling, Mapping):
            configurable[SAMPLING_KEY] = dict(sampling)
        started = time.perf_counter()
        references = tuple(t.index for t in last if not t.failed)
        try:
            out = await self.agent.ainvoke(
                {"messages": conversation, "trajectories": last},
                {**config, "configurable": configurable},
            )
            final = agent_trajectory(
                list(out["messages"])[len(conversation) :],
                round_index=r,
                references=references,
                latency_s=time.perf_counter() - started,
            )
        except Exception as exc:
            final = Trajectory(
                round=r,
                index=0,
                error=f"{type(exc).__name__}: {exc}",
                references=references,
                latency_s=time.perf_counter() - started,
            )
        write(explorer_finished(final))
        write(round_compacted(r, (final,)))
        if final.failed:
            raise RoundFailedError(
                f"round {r}: the aggregator agent failed: {final.error}",
                round_index=r,
                errors=[final.error or ""],
            )
        extra = {k: v for k, v in explored.extra.items() if k not in ("aggregator", "chosen")}
        extra.update(aggregator=AGGREGATOR_NAME, chosen=final.id)
        result = PaCoReResult(
            answer=final.content,
            reasoning=final.reasoning,
            rounds=(*explored.rounds, (final,)),
            schedule=(*explored.schedule, 1),
            problem_id=explored.problem_id,
            wall_s=explored.wall_s + final.latency_s,
            model=explored.model,
            preset=None,
            extra=extra,
            conversation=explored.conversation or tuple(normalize_conversation(conversation)),
        )
        reasoning = {"reasoning_content": final.reasoning} if final.reasoning else {}
        reply = AIMessage(
            content=final.content,
            name=self.name,
            additional_kwargs=reasoning,
            id=answer_message_id(str(extra.get("run_id", ""))),
        )
        return {"answer": final.content, "result": result, "messages": [reply]}


def build_aggagent_graph(
    client: ChatClient,
    n: int,
    *,
    config: PaCoReConfig | None = None,
    compactor: Compactor | str = "conclusion",
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    tool_limits: TrajectoryToolLimits | None = None,
    name: str = "aggagent",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``aggagent:N``: N explorers, then the aggregator agent over their trajectories.

    The explorer round is ``build_pacore_graph``'s (``config`` with rounds
    ``[n]``; sampling, retries, limits, compactor as for any method); the
    agent calls the same ``client`` under the same ``limiter``, with the
    run's sampling. ``tracing`` is accepted for the methods' common
    signature and not used yet (see the module docstring).
    """
    del tracing  # the adapter runs untraced (module docstring)
    cfg = (config or PaCoReConfig()).with_settings({"rounds": [n]})  # validated like any width
    limiter = limiter or SequenceLimiter(cfg.max_concurrency)
    explorers = build_pacore_graph(
        client,
        config=cfg,
        aggregator=FirstAnswer(),  # a placeholder: the agent answers, not this
        compactor=compactor,
        limiter=limiter,
        tracing=False,
        compactors=compactors,
        limits=limits,
        name=f"{name}_round",
    )
    agent = build_aggregator_agent(
        client,
        limiter=limiter,
        sampling=cfg.sampling,
        max_tool_steps=max_tool_steps,
        limits=tool_limits,
    )
    nodes = _Nodes(explorers, agent, name)
    graph = StateGraph(_State, input_schema=PaCoReInput, output_schema=PaCoReOutput)
    graph.add_node("explore", nodes.explore)
    graph.add_node("aggregate", nodes.aggregate)
    graph.add_edge(START, "explore")
    graph.add_edge("explore", "aggregate")
    graph.add_edge("aggregate", END)
    return graph.compile(name=name)
