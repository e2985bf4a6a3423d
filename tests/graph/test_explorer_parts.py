"""What ``explorer=`` may be: each kind becomes the part the nodes run, or a clear TypeError."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import START, MessagesState, StateGraph

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import chat_explorer
from pacore_graph.graph.explorer import ExploreTask, GraphExplorer
from pacore_graph.graph.explorer_parts import aggregator_part, explorer_part
from pacore_graph.graph.messages_explorer import MessagesAggregator
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.testing.fake_client import FakeChatClient
from pacore_graph.values.aggregation import MajorityVote
from pacore_graph.values.records import Trajectory

TASK = ExploreTask(
    run_id="r",
    problem_id=None,
    round=0,
    index=1,
    width=2,
    messages=({"role": "user", "content": "Q?"},),
)


class Custom:
    name = "mine"

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        return Trajectory(round=task.round, index=task.index, content="mine")


def messages_graph() -> Any:
    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"read {len(state['messages'])}")]}

    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    return g.compile(name="talker")


class TaskState(TypedDict, total=False):
    task: ExploreTask
    trajectory: Trajectory


def task_graph() -> Any:
    async def solve(state: TaskState) -> dict[str, Any]:
        task = state["task"]
        return {"trajectory": Trajectory(round=task.round, index=task.index, content="by task")}

    g = StateGraph(TaskState)
    g.add_node("solve", solve)
    g.add_edge(START, "solve")
    return g.compile(name="solver")


async def test_each_kind_of_explorer_becomes_its_part() -> None:
    chat = explorer_part(chat_explorer(FakeChatClient(), SequenceLimiter(4), PaCoReConfig()))
    assert (chat.name, chat.grouped, chat.holds_limits, chat.graph) == (None, True, True, None)

    custom = explorer_part(Custom())
    assert (custom.name, custom.grouped, custom.holds_limits) == ("mine", False, False)
    assert (await custom.run(None, TASK, {})).content == "mine"

    talker = messages_graph()
    part = explorer_part(talker)
    assert (part.name, part.messages, part.graph) == ("talker", True, talker)
    assert (await part.run(part.graph, TASK, {})).content == "read 1"

    solver = task_graph()  # a compiled {task} -> {trajectory} graph: a GraphExplorer
    by_task = explorer_part(solver)
    assert (by_task.name, by_task.messages, by_task.graph) == ("solver", False, solver)
    assert (await by_task.run(by_task.graph, TASK, {})).content == "by task"
    assert explorer_part(GraphExplorer(solver)).graph is solver

    runnable = explorer_part(RunnableLambda(lambda given: AIMessage("lambda")))
    assert (await runnable.run(runnable.graph, TASK, {})).content == "lambda"


def test_what_is_no_explorer_or_aggregator_is_refused() -> None:
    with pytest.raises(TypeError, match="explorer must be a compiled graph or Runnable"):
        explorer_part(lambda task: task)
    part, aggregator = aggregator_part(messages_graph())
    assert isinstance(aggregator, MessagesAggregator) and part.messages
    with pytest.raises(TypeError, match="aggregator must have aggregate"):
        aggregator_part(MajorityVote)
