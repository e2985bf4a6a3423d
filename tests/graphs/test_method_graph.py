"""graphs/method_graph: a method's graph on PaCoRe's own nodes is PaCoRe's graph.

With the plain nodes, ``compile_method_graph`` must build what
``build_pacore_graph`` builds: the same topology and, for a fake model that
answers by its input, the same record. ``method_parts`` makes the builder's
checks, so a bad client or compactor fails before anything runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.graph.compaction import AnswerCompactor
from pacore_graph.graph.nodes import PaCoReNodes
from pacore_graph.graph.records import Trajectory
from pacore_graph.graph.state import PaCoReState
from pacore_graph.graphs.method_graph import compile_method_graph, method_parts
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

CONFIG = PaCoReConfig(rounds=[3, 2], sampling={"seed": 7})
QUESTION = "What is 6 times 7?"


def by_input(call: FakeCall) -> FakeReply:
    """The reply names the sample and how long the prompt was: a wrong prompt shows."""
    size = len(call.last_user)
    return FakeReply(
        content=f"sample {call.sample_index} read {size} \\boxed{{{size % 5}}}",
        completion_tokens=3 + call.sample_index,
    )


def plain_method_graph(client: Any) -> Any:
    parts = method_parts(client, CONFIG)
    return compile_method_graph(
        PaCoReNodes(explorer=parts.explorer, **parts.node_kwargs()), PaCoReState, name="pacore"
    )


def test_the_plain_nodes_give_the_builders_topology() -> None:
    mine = plain_method_graph(FakeChatClient(by_input)).get_graph()
    theirs = build_pacore_graph(FakeChatClient(by_input), config=CONFIG).get_graph()
    assert set(mine.nodes) == set(theirs.nodes)
    assert {(e.source, e.target) for e in mine.edges} == {
        (e.source, e.target) for e in theirs.edges
    }


async def test_the_plain_nodes_give_the_builders_record() -> None:
    mine = await ainvoke_pacore(plain_method_graph(FakeChatClient(by_input)), QUESTION)
    theirs = await ainvoke_pacore(
        build_pacore_graph(FakeChatClient(by_input), config=CONFIG), QUESTION
    )
    assert mine.answer == theirs.answer
    assert mine.schedule == theirs.schedule == (3, 2, 1)
    assert mine.ttc_per_round == theirs.ttc_per_round

    def contents(rounds: tuple[tuple[Trajectory, ...], ...]) -> list[list[str]]:
        return [[t.content for t in r] for r in rounds]

    assert contents(mine.rounds) == contents(theirs.rounds)


def test_a_client_without_complete_is_refused() -> None:
    with pytest.raises(TypeError, match="must implement ChatClient"):
        method_parts(object(), CONFIG)  # type: ignore[arg-type]


def test_a_compactor_without_compact_is_refused() -> None:
    with pytest.raises(TypeError, match="has no compact"):
        method_parts(FakeChatClient(by_input), CONFIG, compactor=object())  # type: ignore[arg-type]


def test_a_compactor_name_is_resolved_from_the_registry_first() -> None:
    mine = AnswerCompactor()
    parts = method_parts(
        FakeChatClient(by_input), CONFIG, compactor="mine", compactors={"mine": mine}
    )
    assert parts.compactor is mine
    assert parts.node_kwargs()["compactor"] is mine
    assert parts.node_kwargs()["model_name"] == "fake"


class Payload:
    """A method's own ``Send`` payload type."""


def test_extra_types_are_allowed_by_the_checkpointers_serializer() -> None:
    parts = method_parts(FakeChatClient(by_input), CONFIG)
    graph = compile_method_graph(
        PaCoReNodes(explorer=parts.explorer, **parts.node_kwargs()),
        PaCoReState,
        name="m",
        checkpointer=InMemorySaver(),
        extra_types=[Payload],
    )
    allowed = set(graph.checkpointer.serde._allowed_msgpack_modules)
    assert (Payload.__module__, Payload.__name__) in allowed
    assert ("pacore_graph.graph.records", "Trajectory") in allowed
