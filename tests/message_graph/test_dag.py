"""message_graph/dag: nodes, edges and grading from a run's records.

Most tests use hand-made records (message_graph_support); one runs the real
graph with the fake model to check that what a run records is what the graph
shows.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx
import pytest
from message_graph_support import (
    edge_set,
    expected_edges,
    scripted,
    traj,
)

from pacore_graph import PaCoReConfig, SamplingParams, ainvoke_pacore, build_pacore_graph
from pacore_graph.eval.graders import ExactGrader, Grade
from pacore_graph.message_graph import (
    message_graph,
)
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.records import PaCoReResult


def test_nodes_and_edges_follow_the_records() -> None:
    result = scripted()
    g = message_graph(result)
    assert isinstance(g, nx.DiGraph)
    assert g.number_of_nodes() == sum(result.schedule) == 7
    assert set(g.nodes) == {t.id for t in result.trajectories}
    assert edge_set(g) == expected_edges(result)
    # Positions are prompt order, not index order.
    assert g.edges["r0.3", "r1.0"]["position"] == 1
    assert g.edges["r0.2", "r1.0"]["position"] == 3
    assert g.edges["r1.1", "r2.0"]["position"] == 1
    assert nx.is_directed_acyclic_graph(g)
    assert g.graph == {
        "problem_id": "p1",
        "answer": "So the answer is \\boxed{42}.",
        "final_answer": "42",
        "final": "r2.0",
        "effective_ttc": result.effective_ttc,
        "schedule": [4, 2, 1],
        "model": "fake",
        "preset": "low",
        "ground_truth": None,
    }


def test_node_attributes_and_the_failed_call() -> None:
    g = message_graph(scripted())
    ok = g.nodes["r0.3"]
    assert ok["round"] == 0 and ok["index"] == 3
    assert ok["answer"] == "42"  # the conclusion's box, not the one in the thinking
    assert ok["truncated"] is True and ok["finish_reason"] == "length"
    assert ok["failed"] is False and ok["error"] == ""
    assert ok["completion_tokens"] == 13 and ok["prompt_tokens"] == 5
    assert ok["message_chars"] == len("So the answer is \\boxed{42}.")
    assert "correct" not in ok  # no ground truth, no grading
    bad = g.nodes["r0.1"]
    assert bad["failed"] is True and bad["error"] == "HTTP 500: boom"
    assert bad["answer"] == "" and bad["message_chars"] == 0 and bad["finish_reason"] == ""
    assert g.out_degree("r0.1") == 0
    assert [n for n in g.nodes if g.out_degree(n) == 0] == ["r0.1", "r2.0"]
    assert [n for n, final in g.nodes(data="final") if final] == ["r2.0"]
    assert {n: a for n, a in g.nodes(data="answer")} == {
        "r0.0": "42",
        "r0.1": "",
        "r0.2": "41",
        "r0.3": "42",
        "r1.0": "42",
        "r1.1": "7",
        "r2.0": "42",
    }


def test_correctness_with_a_ground_truth() -> None:
    g = message_graph(scripted(), ground_truth={"answer": "42"})
    correct = {n for n, c in g.nodes(data="correct") if c}
    assert correct == {"r0.0", "r0.3", "r1.0", "r2.0"}
    assert g.nodes["r0.1"]["correct"] is False and g.nodes["r0.1"]["score"] == 0.0
    assert g.nodes["r0.2"]["correct"] is False
    assert g.graph["ground_truth"] == "42"
    # A record without a readable ground truth is not graded (rather than all wrong).
    assert "correct" not in message_graph(scripted(), ground_truth={"other": 1}).nodes["r0.0"]


def test_a_given_grader_is_used_and_its_errors_count_as_wrong() -> None:
    seen: list[str] = []

    class Sevens:
        name = "sevens"

        def grade(self, response: str, ground_truth: Any) -> Grade:
            seen.append(response)
            return Grade(1.0 if "{7}" in response else 0.0, True)

    g = message_graph(scripted(), ground_truth="7", grader=Sevens())
    assert {n for n, c in g.nodes(data="correct") if c} == {"r1.1"}
    assert len(seen) == 6  # the failed call is not graded

    class Broken:
        name = "broken"

        def grade(self, response: str, ground_truth: Any) -> Grade:
            raise RuntimeError("grader bug")

    g = message_graph(scripted(), ground_truth="42", grader=Broken())
    assert not any(c for _, c in g.nodes(data="correct"))

    exact = message_graph(scripted(), ground_truth="41", grader=ExactGrader())
    assert {n for n, c in exact.nodes(data="correct") if c} == {"r0.2"}


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        ((3, 1), "references r0.1, which failed"),
        ((0, 9), "references r0.9, which is not in the record"),
        ((0, 0), "references a message twice"),
    ],
)
def test_inconsistent_references_are_rejected(refs: tuple[int, ...], message: str) -> None:
    result = scripted()
    rounds = list(result.rounds)
    rounds[1] = (traj(1, 0, "42", refs), rounds[1][1])
    bad = PaCoReResult(
        answer=result.answer, reasoning=None, rounds=tuple(rounds), schedule=result.schedule
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        message_graph(bad)


async def test_a_real_run_is_its_references() -> None:
    def reply(call: FakeCall) -> FakeReply:
        first_round = "Reference 1:" not in call.last_user
        # Unbatched, explorer i is sent seed 100 + i: fail explorer 1 of round 0 only.
        if first_round and call.seed == 101:
            return FakeReply(content="", error="HTTP 500: boom")
        refs = len(re.findall(r"^Reference \d+:$", call.last_user, flags=re.M))
        return FakeReply(content=f"<think>t</think>\\boxed{{{refs + (call.seed or 0) % 2}}}")

    client = FakeChatClient(reply=reply)
    config = PaCoReConfig(
        rounds=[4, 2], batch_samples=False, shuffle_seed=3, sampling=SamplingParams(seed=100)
    )
    result = await ainvoke_pacore(build_pacore_graph(client, config=config), "Q?", problem_id="q")
    g = message_graph(result, ground_truth="3")
    assert g.number_of_nodes() == 4 + 2 + 1
    assert edge_set(g) == expected_edges(result)
    assert g.number_of_edges() == 2 * 3 + 2  # round 1 reads the 3 messages left, round 2 both
    assert g.nodes["r0.1"]["failed"] and g.out_degree("r0.1") == 0
    assert all(1 not in t.references for t in result.rounds[1])
    assert g.nodes["r0.0"]["answer"] == "0" and g.nodes["r0.2"]["answer"] == "0"
    assert g.nodes["r1.0"]["answer"] == "3" and g.nodes["r1.0"]["correct"] is True
    assert g.nodes["r1.1"]["answer"] == "4" and g.nodes["r1.1"]["correct"] is False
