"""``aggagent:N`` end to end (graphs/aggagent_method): N explorers, then the agent, one record.

Over real HTTP against the scripted server, whose replies are a function of
the request: an explorer (no tools offered) answers by its sample index
(indices 0 and 2 say 41, the others 42); the agent lists the trajectories,
reads the one that said 41 first, then answers with the other answer. So the
record's every number is known before the run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from pacore_graph.errors import RoundFailedError
from pacore_graph.graph.records import Trajectory
from pacore_graph.graph.seeds import explorer_seed
from pacore_graph.graph.streaming import answer_message_id
from pacore_graph.graphs.aggagent_method import agent_trajectory, build_aggagent_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig, RetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall
from pacore_graph.testing.scripted_server import count_tokens

N = 4
SEED = 7
QUESTION = {"role": "user", "content": "What is 20 + 22?"}


def explorer_reply(req: ScriptedRequest) -> ScriptedReply:
    answer = 41 if req.sample_index % 2 == 0 else 42
    return ScriptedReply(content=f"So \\boxed{{{answer}}}.", reasoning=f"sum {answer}")


def agent_reply(req: ScriptedRequest) -> ScriptedReply:
    results = [m["content"] for m in req.messages if m.get("role") == "tool"]
    if not results:
        return ScriptedReply(
            content="", reasoning="list", tool_calls=(ScriptedToolCall("list_trajectories", {}),)
        )
    if len(results) == 1:
        rows = [json.loads(line) for line in results[0].splitlines()[1:]]
        odd = next(r["index"] for r in rows if r.get("answer") == "41")
        return ScriptedReply(
            content="",
            reasoning="read",
            tool_calls=(ScriptedToolCall("read_trajectory", {"index": odd}),),
        )
    return ScriptedReply(content="20 + 22 = 42: \\boxed{42}.", reasoning="41 is a slip")


def respond(req: ScriptedRequest) -> ScriptedReply:
    return agent_reply(req) if req.params.get("tools") else explorer_reply(req)


def words(reply: ScriptedReply) -> int:
    return count_tokens(reply.content) + count_tokens(reply.reasoning)


async def run(respond_with: Any = respond, **ainvoke: Any) -> tuple[dict[str, Any], ScriptedServer]:
    async with ScriptedServer(respond_with) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=RetryPolicy(max_attempts=1))
        config = PaCoReConfig(sampling=SamplingParams(seed=SEED), retry=RetryPolicy(max_attempts=1))
        graph = build_aggagent_graph(client, N, config=config)
        try:
            out = await graph.ainvoke({"messages": [QUESTION], "problem_id": "p"}, **ainvoke)
        finally:
            await client.aclose()
        return out, srv


async def test_n_explorers_in_one_request_then_the_agent_answers() -> None:
    out, srv = await run(context={"temperature": 0.3})
    result = out["result"]
    assert out["answer"] == result.answer == "20 + 22 = 42: \\boxed{42}."
    assert result.schedule == (N, 1) and [len(r) for r in result.rounds] == [N, 1]
    final = result.rounds[-1][0]
    assert final.id == "r1.0" and result.final is final
    assert result.extra["aggregator"] == "aggagent" and result.extra["chosen"] == "r1.0"
    assert final.reasoning == "41 is a slip"
    assert [c.name for c in final.tool_calls] == ["list_trajectories", "read_trajectory"]
    assert final.tool_calls[0].output.startswith("4 trajectories, 0 failed.")
    assert final.tool_calls[1].output.startswith("trajectory 0, characters 0-")
    assert final.references == (0, 1, 2, 3)
    # Tokens: every agent call's, summed; effective TTC counts them with the explorers'.
    agent_calls = [r.body for r in srv.requests if r.body.get("tools")]
    assert len(agent_calls) == 3
    script = [
        ScriptedReply(content="", reasoning="list"),
        ScriptedReply(content="", reasoning="read"),
        ScriptedReply(content="20 + 22 = 42: \\boxed{42}.", reasoning="41 is a slip"),
    ]
    assert final.completion_tokens == sum(words(r) for r in script)
    assert final.prompt_tokens > 0
    explorers = sum(t.completion_tokens for t in result.rounds[0])
    assert result.effective_ttc == explorers + final.completion_tokens
    # One n=N request for the explorers; the run's context sampling reached every call.
    batch = [r.body for r in srv.requests if not r.body.get("tools")]
    assert [b.get("n") for b in batch] == [N]
    assert {b["temperature"] for b in [*batch, *agent_calls]} == {0.3}
    assert {b["seed"] for b in agent_calls} == {explorer_seed(SEED, 1, 0)}
    # The answer message, as PaCoRe's: the run's answer id; the conversation recorded.
    answer = out["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.content == result.answer
    assert answer.id == answer_message_id(result.extra["run_id"])
    assert result.conversation == (QUESTION,)


async def test_progress_events_cover_both_rounds() -> None:
    async with ScriptedServer(respond) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted")
        graph = build_aggagent_graph(client, N, config=PaCoReConfig(sampling={"seed": SEED}))
        try:
            events = [
                e async for e in graph.astream({"messages": [QUESTION]}, stream_mode="custom")
            ]
        finally:
            await client.aclose()
    kinds = [(e["event"], e["round"]) for e in events]
    assert kinds == [
        ("round_started", 0),
        *[("explorer_finished", 0)] * N,
        ("round_compacted", 0),
        ("round_started", 1),
        ("explorer_finished", 1),
        ("round_compacted", 1),
    ]
    assert (events[0]["width"], events[-3]["width"]) == (N, 1)


async def test_a_failed_agent_fails_the_run_with_its_round() -> None:
    def agent_down(req: ScriptedRequest) -> int | None:
        return 400 if req.params.get("tools") else None

    async with ScriptedServer(respond, fail_when=agent_down) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=RetryPolicy(max_attempts=1))
        graph = build_aggagent_graph(client, N)
        try:
            failed = r"aggregator agent failed.*HTTP 400"
            with pytest.raises(RoundFailedError, match=failed) as info:
                await graph.ainvoke({"messages": [QUESTION]})
        finally:
            await client.aclose()
    assert info.value.round_index == 1 and len(info.value.errors) == 1


def test_the_final_record_is_built_from_the_agents_messages() -> None:
    with pytest.raises(ValueError, match="no AI message"):
        agent_trajectory([], round_index=1, references=(), latency_s=0.0)
    record = agent_trajectory(
        [AIMessage("x", usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5})],
        round_index=2,
        references=(1,),
        latency_s=0.5,
    )
    assert isinstance(record, Trajectory)
    assert (record.round, record.content, record.message, record.completion_tokens) == (
        2,
        "x",
        "x",
        2,
    )
