"""The PaCoRe graph with a fake model that answers by input.

HTTP behaviour is tested against the scripted server in test_http_run.py; here
the graph's own logic: widths, the final round, message passing, shuffling,
failure handling, composition, streaming and topology.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from pacore_graph import (
    OpenAICompatClient,
    PaCoReConfig,
    PaCoReResult,
    RoundFailedError,
    SamplingParams,
    Trajectory,
    ainvoke_pacore,
    build_pacore_graph,
)
from pacore_graph.graph.explorer import ExploreTask, GraphExplorer
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.prompts import render_synthesis

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "pacore_graph.mmd"
UPDATE_SNAPSHOTS_ENV = "PACORE_UPDATE_SNAPSHOTS"
"""Set to ``1`` to write the snapshot instead of comparing against it (never implicit:
a missing snapshot is a failure, or the test could not fail on a fresh checkout)."""


def numbered(call: FakeCall) -> FakeReply:
    """Answer names the prompt's round (by counting references) and the sample."""
    refs = len(re.findall(r"^Reference \d+:$", call.last_user, flags=re.M))
    return FakeReply(
        content=f"<think>scratch {call.sample_index}</think>ans-{refs}-{call.sample_index}",
        completion_tokens=10 + call.sample_index,
    )


async def test_widths_final_round_and_ttc() -> None:
    client = FakeChatClient(reply=numbered)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[5, 3]))
    result = await ainvoke_pacore(graph, "What is 1+1?", problem_id="p1")
    assert [len(r) for r in result.rounds] == [5, 3, 1]
    assert result.schedule == (5, 3, 1)
    assert len(client.calls) == 9
    # Batched: one request per round.
    assert client.requests == 3
    assert result.ttc_per_round == (10 + 11 + 12 + 13 + 14, 10 + 11 + 12, 10)
    assert result.effective_ttc == sum(result.ttc_per_round)
    assert result.answer == "ans-3-0"
    assert result.problem_id == "p1"
    assert all(t.message == t.content.split("</think>")[1] for t in result.trajectories)


async def test_next_round_prompt_holds_exactly_previous_messages() -> None:
    client = FakeChatClient(reply=numbered)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4, 2], shuffle_seed=7))
    result = await ainvoke_pacore(graph, "Q?")
    for r in (1, 2):
        prev = result.rounds[r - 1]
        prompts = {c.last_user for c in client.calls if c.last_user.startswith("You are given")}
        round_prompts = [
            c
            for c in client.calls
            if len(re.findall(r"^Reference \d+:$", c.last_user, flags=re.M)) == len(prev)
        ]
        assert prompts and round_prompts
        refs = result.rounds[r][0].references
        assert sorted(refs) == [t.index for t in prev]
        expected = render_synthesis("Q?", [prev[i].message or "" for i in refs])
        assert all(c.last_user == expected for c in round_prompts)
        assert all(t.references == refs for t in result.rounds[r])


async def test_shuffle_is_deterministic_per_seed() -> None:
    async def refs_for(seed: int | None) -> tuple[int, ...]:
        client = FakeChatClient(reply=numbered)
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[8], shuffle_seed=seed))
        result = await ainvoke_pacore(graph, "Q?")
        return result.rounds[1][0].references

    first = await refs_for(3)
    assert first == await refs_for(3)
    assert sorted(first) == list(range(8))
    assert await refs_for(None) == tuple(range(8))
    assert len({await refs_for(s) for s in range(6)}) > 1


async def test_failed_calls_are_recorded_and_excluded() -> None:
    def flaky(call: FakeCall) -> FakeReply:
        # Unbatched, explorer i of round 0 is sent seed 100 + i: fail explorers 1 and 3.
        if call.seed in (101, 103):
            return FakeReply(content="", error="HTTP 500: boom")
        return numbered(call)

    client = FakeChatClient(reply=flaky)
    config = PaCoReConfig(rounds=[4], batch_samples=False, sampling=SamplingParams(seed=100))
    graph = build_pacore_graph(client, config=config)
    result = await ainvoke_pacore(graph, "Q?")
    first = result.rounds[0]
    assert [t.failed for t in first] == [False, True, False, True]
    assert first[1].error is not None and "boom" in first[1].error
    assert first[1].message is None and first[1].content == ""
    assert sorted(result.rounds[1][0].references) == [0, 2]
    assert result.failures == 2
    final_prompt = [c for c in client.calls if "Reference 2:" in c.last_user]
    assert final_prompt and "Reference 3:" not in final_prompt[0].last_user


async def test_a_round_where_every_call_fails_stops_with_the_cause() -> None:
    client = FakeChatClient(reply=lambda call: FakeReply(content="", error="cannot reach server"))
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[3]))
    with pytest.raises(RoundFailedError, match="round 0: all 3 explorer calls failed") as info:
        await ainvoke_pacore(graph, "Q?")
    assert "cannot reach server" in str(info.value)
    assert info.value.round_index == 0 and len(info.value.errors) == 3


async def test_truncated_trajectories_are_flagged() -> None:
    client = FakeChatClient(reply=lambda c: FakeReply(content="cut", finish_reason="length"))
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    result = await ainvoke_pacore(graph, "Q?")
    assert result.truncations == 3
    assert all(t.truncated and t.to_dict()["truncated"] for t in result.trajectories)


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "user", "content": "   "}],
        [{"role": "system", "content": "only a system prompt"}],
    ],
)
async def test_empty_problems_are_rejected(messages: list[dict[str, str]]) -> None:
    graph = build_pacore_graph(FakeChatClient(), config=PaCoReConfig(rounds=[2]))
    with pytest.raises(ValueError, match=r"problem|user message"):
        await graph.ainvoke({"messages": messages})


async def test_answer_is_appended_to_messages_and_conversation_kept() -> None:
    graph = build_pacore_graph(FakeChatClient(reply=numbered), config=PaCoReConfig(rounds=[2]))
    out = await graph.ainvoke(
        {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Q?"}]}
    )
    assert [m.type for m in out["messages"]] == ["system", "human", "ai"]
    assert out["messages"][-1].content == out["answer"] == "ans-2-0"
    assert set(out) == {"messages", "answer", "result"}


async def test_composes_as_a_node_of_a_larger_graph() -> None:
    pacore = build_pacore_graph(FakeChatClient(reply=numbered), config=PaCoReConfig(rounds=[3]))

    class Outer(MessagesState):
        answer: str
        verdict: str

    async def check(state: Outer) -> dict[str, Any]:
        return {"verdict": "ok" if state["answer"].startswith("ans-3") else "bad"}

    outer = StateGraph(Outer)
    outer.add_node("pacore", pacore)
    outer.add_node("check", check)
    outer.add_edge(START, "pacore")
    outer.add_edge("pacore", "check")
    app = outer.compile()
    out = await app.ainvoke({"messages": [HumanMessage("Q?")]})
    assert out["verdict"] == "ok"
    assert isinstance(out["messages"][-1], AIMessage)
    assert len(out["messages"]) == 2  # the question once, then the answer


@pytest.mark.parametrize(("batch", "tasks_per_round"), [(True, [1, 1, 1]), (False, [3, 2, 1])])
async def test_astream_shows_progress_per_round(batch: bool, tasks_per_round: list[int]) -> None:
    """Batched explorers of a round travel as one ``Send``; unbatched ones as one each."""
    graph = build_pacore_graph(
        FakeChatClient(reply=numbered), config=PaCoReConfig(rounds=[3, 2], batch_samples=batch)
    )
    compacted = []
    tasks: list[int] = []
    trajectories: list[tuple[int, int]] = []
    async for update in graph.astream(
        {"messages": [{"role": "user", "content": "Q?"}]}, stream_mode="updates"
    ):
        if "explore" in update:
            pending = update["explore"]["pending"]
            if len(tasks) == len(compacted):
                tasks.append(0)
            tasks[-1] += 1
            trajectories += [(t.round, t.index) for t in pending]
        if "compact" in update:
            compacted.append(update["compact"]["round"])
    assert compacted == [1, 2, 3]
    assert tasks == tasks_per_round
    assert sorted(trajectories) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]


async def test_a_batched_round_is_one_request_and_a_bug_fails_its_trajectories() -> None:
    """A grouped round sends one ``n=K`` request; an unexpected error is not an ExceptionGroup."""
    client = FakeChatClient(reply=numbered)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4, 3]))
    result = await ainvoke_pacore(graph, "Q?")
    assert [len(r) for r in result.rounds] == [4, 3, 1]
    assert client.requests == 3  # one per round
    assert [c.n for c in client.calls] == [4, 4, 4, 4, 3, 3, 3, 1]

    def broken(call: FakeCall) -> FakeReply:
        raise LookupError(f"bug in sample {call.sample_index}")

    # Issue 32: whatever an explorer raises fails its trajectory (recorded with its type),
    # never the run as a bare exception, nor as an ExceptionGroup; all four here.
    graph = build_pacore_graph(FakeChatClient(reply=broken), config=PaCoReConfig(rounds=[4]))
    with pytest.raises(RoundFailedError, match=r"all 4 explorer calls failed; .*LookupError: bug"):
        await ainvoke_pacore(graph, "Q?")


def test_topology_snapshot() -> None:
    graph = build_pacore_graph(FakeChatClient(), config=PaCoReConfig(rounds=[2]))
    mermaid = graph.get_graph().draw_mermaid()
    if os.environ.get(UPDATE_SNAPSHOTS_ENV) == "1":  # the explicit way to (re)write it
        SNAPSHOT.write_text(mermaid)
    assert SNAPSHOT.exists(), (
        f"{SNAPSHOT} is missing: run with {UPDATE_SNAPSHOTS_ENV}=1 to write it, "
        "then review and commit the file"
    )
    assert mermaid == SNAPSHOT.read_text(), (
        f"the graph's topology changed; if on purpose, rerun with {UPDATE_SNAPSHOTS_ENV}=1 "
        "and commit the new snapshot"
    )


async def test_a_compiled_subgraph_can_be_the_explorer() -> None:
    class ExplorerState(TypedDict, total=False):
        task: ExploreTask
        trajectory: Trajectory

    async def solve(state: ExplorerState) -> dict[str, Any]:
        task = state["task"]
        return {
            "trajectory": Trajectory(
                round=task.round,
                index=task.index,
                content=f"sub {task.round}.{task.index}",
                completion_tokens=1,
            )
        }

    sub = StateGraph(ExplorerState)
    sub.add_node("solve", solve)
    sub.add_edge(START, "solve")
    graph = build_pacore_graph(
        explorer=GraphExplorer(sub.compile()), config=PaCoReConfig(rounds=[2])
    )
    result = await ainvoke_pacore(graph, "Q?")
    assert [t.message for t in result.trajectories] == ["sub 0.0", "sub 0.1", "sub 1.0"]
    assert result.effective_ttc == 3


def test_builder_rejects_bad_parts() -> None:
    with pytest.raises(ValueError, match="needs a client"):
        build_pacore_graph()
    with pytest.raises(TypeError, match="ChatClient"):
        build_pacore_graph(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown compactor"):
        build_pacore_graph(FakeChatClient(), compactor="nope")
    with pytest.raises(ValueError, match="template"):
        build_pacore_graph(FakeChatClient(), template="no placeholders")
    with pytest.raises(TypeError, match="explore"):
        build_pacore_graph(explorer=object())  # type: ignore[arg-type]


def test_one_graph_runs_in_separate_event_loops() -> None:
    """One compiled graph serves two event loops, one after the other.

    ``asyncio.run`` makes a new loop per call and closes it after, so the
    second run must not reuse anything bound to the first loop (locks,
    semaphores, pending batches); the loops are checked to be two.
    """
    import asyncio

    graph = build_pacore_graph(FakeChatClient(reply=numbered), config=PaCoReConfig(rounds=[2]))
    loops: list[asyncio.AbstractEventLoop] = []

    async def run_once() -> str:
        loops.append(asyncio.get_running_loop())
        return (await ainvoke_pacore(graph, "Q?")).answer

    answers = [asyncio.run(run_once()) for _ in range(2)]
    assert answers == ["ans-2-0", "ans-2-0"]
    assert len(loops) == 2 and loops[0] is not loops[1]
    assert loops[0].is_closed()  # the first loop was gone while the second ran


def test_one_graph_and_its_http_client_serve_separate_event_loops() -> None:
    """The same, over real HTTP: the client's aiohttp session must not cross loops."""
    import asyncio

    with ScriptedServer(model="m").run_in_thread() as server:
        client = OpenAICompatClient(server.base_url, "m")
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
        loops: list[asyncio.AbstractEventLoop] = []

        async def run_once() -> PaCoReResult:
            loops.append(asyncio.get_running_loop())
            try:
                return await ainvoke_pacore(graph, "Q?")
            finally:
                await client.aclose()  # this loop's session, closed before its loop

        results = [asyncio.run(run_once()) for _ in range(2)]
        requests = server.request_count
    assert len(loops) == 2 and loops[0] is not loops[1] and loops[0].is_closed()
    assert [r.failures for r in results] == [0, 0]
    assert all(r.answer for r in results)
    assert requests >= 2 * 2  # both runs reached the server (K=2, then the synthesis)
