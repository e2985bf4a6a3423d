"""The graph's state and its public input/output schemas (graph/state).

The input and output schemas are what ``langgraph dev`` publishes and what a
parent graph sees when it adds PaCoRe as a node, so they must show exactly the
public keys, never the run's internals.
"""

from __future__ import annotations

from typing import get_type_hints

from langchain_core.messages import AIMessage, HumanMessage

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.graph.state import (
    PaCoReInput,
    PaCoReOutput,
    PaCoReState,
    RunShape,
    collect_trajectories,
)
from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing.fake_client import FakeChatClient
from pacore_graph.values.records import Trajectory


def t(index: int) -> Trajectory:
    return Trajectory(round=0, index=index, content=str(index))


def test_pending_collects_the_explorers_and_is_emptied_by_none() -> None:
    first = collect_trajectories(None, [t(0)])
    both = collect_trajectories(first, [t(2), t(1)])
    assert [x.index for x in both] == [0, 2, 1]  # arrival order; compaction sorts
    assert first == [t(0)]  # the earlier value is not changed in place
    assert collect_trajectories(both, None) == []


def test_run_shape_from_a_checkpoint_keeps_its_schedule_a_tuple() -> None:
    shape = RunShape(schedule=[4, 1], sampling=SamplingParams(seed=3))  # type: ignore[arg-type]
    assert shape.schedule == (4, 1) and type(shape.schedule) is tuple


def test_input_and_output_are_the_public_part_of_the_state() -> None:
    state_keys = set(get_type_hints(PaCoReState, include_extras=True))
    input_keys = set(get_type_hints(PaCoReInput, include_extras=True))
    output_keys = set(get_type_hints(PaCoReOutput, include_extras=True))
    assert input_keys == {"messages", "problem_id"}
    assert output_keys == {"messages", "answer", "result"}
    assert input_keys | output_keys <= state_keys
    graph = build_pacore_graph(FakeChatClient(), config=PaCoReConfig(rounds=[1]))
    assert set(graph.get_input_jsonschema()["properties"]) == input_keys
    assert set(graph.get_output_jsonschema()["properties"]) == output_keys


async def test_the_answer_is_appended_to_the_callers_conversation() -> None:
    graph = build_pacore_graph(FakeChatClient(), config=PaCoReConfig(rounds=[1]))
    out = await graph.ainvoke({"messages": [HumanMessage("What is 2+2?")]})
    question, reply = out["messages"]  # add_messages: appended, not replaced
    assert question.content == "What is 2+2?"
    assert isinstance(reply, AIMessage) and reply.content == out["answer"]
    assert set(out) == set(get_type_hints(PaCoReOutput))  # nothing internal leaks out
