"""The aggregator agent (graphs/aggagent) on its own: the contract's input in, messages out.

The model is the scripted server over real HTTP, reached through our own
client. Its responder answers by the request's content, never call order:
with no tool result in the conversation it lists the trajectories; with the
list it searches for the most common answer and reads the trajectory of the
least common one; with those results it answers with the answer it read.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pacore_graph.errors import RoundFailedError
from pacore_graph.graph.checkpoint_types import pacore_serde
from pacore_graph.graph.streaming import answer_message_id
from pacore_graph.graphs.aggagent import (
    AGGAGENT_SYSTEM_PROMPT,
    FINAL_NOTE,
    AggregatorAgentError,
    agent_prompt,
    build_aggagent_graph,
    build_aggregator_agent,
    run_sampling,
)
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall
from pacore_graph.testing.scripted_server import count_tokens
from pacore_graph.tools.trajectories import TrajectoryToolLimits
from pacore_graph.values.records import ToolCallRecord, Trajectory
from pacore_graph.values.seeds import explorer_seed

QUESTION = "What is 17 + 25? Put the answer in \\boxed{}."
TALLY = re.compile(r"Answers \(most common first\): (.*)\.")


def trajectory(index: int, answer: int, words: int = 40) -> Trajectory:
    steps = " ".join(f"step{k}" for k in range(words))
    content = f"Adding the tens and the units: {steps}. So \\boxed{{{answer}}}."
    return Trajectory(round=0, index=index, content=content, message=content, reasoning="add")


ROUND = (
    trajectory(0, 43),
    trajectory(1, 42, words=400),  # long: a read of it is cut to the limit
    Trajectory(round=0, index=2, error="UpstreamStatusError: HTTP 500"),
    trajectory(3, 43),
)


def tool_results(req: ScriptedRequest) -> list[dict[str, Any]]:
    return [m for m in req.messages if m.get("role") == "tool"]


def agent_model(req: ScriptedRequest) -> ScriptedReply:
    """List, then search the majority's answer and read the minority's trajectory, then answer."""
    if not req.params.get("tools"):  # asked to answer now (out of tool steps)
        return ScriptedReply(content="Out of steps: \\boxed{0}.", reasoning="no more tools")
    results = tool_results(req)
    if not results:
        return ScriptedReply(
            content="", reasoning="survey", tool_calls=(ScriptedToolCall("list_trajectories", {}),)
        )
    if len(results) == 1:
        tally = TALLY.search(results[0]["content"])
        assert tally is not None, results[0]["content"]
        answers = re.findall(r"'([^']*)' x(\d+)", tally.group(1))
        majority, minority = answers[0][0], answers[-1][0]
        listed = [json.loads(line) for line in results[0]["content"].splitlines()[1:]]
        first_minority = next(row["index"] for row in listed if row.get("answer") == minority)
        return ScriptedReply(
            content="",
            reasoning=f"check {majority} against {minority}",
            tool_calls=(
                ScriptedToolCall("search_trajectories", {"pattern": f"boxed{{{majority}}}"}),
                ScriptedToolCall("read_trajectory", {"index": first_minority, "start": 0}),
            ),
        )
    cut = re.search(r"^trajectory (\d+), characters \d+-\d+ of (\d+):", results[-1]["content"])
    if cut and "[cut: read on" in results[-1]["content"]:  # read its end, where the answer is
        index, size = int(cut.group(1)), int(cut.group(2))
        return ScriptedReply(
            content="",
            reasoning="read the end",
            tool_calls=(
                ScriptedToolCall("read_trajectory", {"index": index, "start": size - 200}),
            ),
        )
    read = results[-1]["content"]
    found = re.search(r"\\boxed\{(\d+)\}", read)
    answer = found.group(1) if found else "none"
    return ScriptedReply(content=f"17 + 25 = 42, so \\boxed{{{answer}}}.", reasoning="verified")


@pytest.fixture
async def client() -> AsyncIterator[tuple[ScriptedServer, OpenAICompatClient]]:
    async with ScriptedServer(agent_model) as srv:
        c = OpenAICompatClient(srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1))
        try:
            yield srv, c
        finally:
            await c.aclose()


def contract_input() -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": QUESTION}], "trajectories": ROUND}


async def test_the_agent_lists_searches_reads_then_answers(
    client: tuple[ScriptedServer, OpenAICompatClient],
) -> None:
    srv, c = client
    limits = TrajectoryToolLimits(max_result_chars=600)
    agent = build_aggregator_agent(c, limits=limits)
    config: RunnableConfig = {
        "configurable": {"pacore_sampling": {"temperature": 0.2, "seed": 5, "model": "m"}}
    }
    out = await agent.ainvoke(contract_input(), config)
    messages = out["messages"]
    assert set(out) == {"messages"}
    # The conversation, then the agent's own: call, result, calls, results, answer.
    assert isinstance(messages[0], HumanMessage) and messages[0].content == QUESTION
    kinds = [type(m).__name__ for m in messages[1:]]
    assert kinds == [
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    answer = messages[-1]
    assert isinstance(answer, AIMessage) and not answer.tool_calls
    # It read trajectory 1 (the minority's 42) and answered with what it read.
    assert answer.content == "17 + 25 = 42, so \\boxed{42}."
    assert answer.additional_kwargs["reasoning_content"] == "verified"
    ai = [m for m in messages if isinstance(m, AIMessage)]
    assert all(m.usage_metadata and m.usage_metadata["output_tokens"] > 0 for m in ai)
    listed, searched, read, read_on = (m for m in messages if isinstance(m, ToolMessage))
    assert listed.content.startswith(
        "4 trajectories, 1 failed. Answers (most common first): '43' x2, '42' x1."
    )
    assert '"index": 2, "failed": true' in listed.content
    assert searched.content.startswith("2 matches in 2 trajectories")
    # Bounded: trajectory 1 is ~3,000 characters; the read stops at the limit and says how to go on.
    assert len(read.content) <= limits.max_result_chars
    assert "[cut: read on with start=" in read.content
    assert read_on.content.startswith("trajectory 1, characters ")
    assert read_on.content.endswith("So \\boxed{42}.")
    # Four requests, each with the tools and the round's sampling, its seed the call's own.
    bodies = [r.body for r in srv.requests]
    assert len(bodies) == 4
    assert all(
        {t["function"]["name"] for t in b["tools"]}
        == {"list_trajectories", "read_trajectory", "search_trajectories"}
        for b in bodies
    )
    assert {(b["temperature"], b["seed"]) for b in bodies} == {(0.2, 5)}
    assert bodies[0]["messages"][0] == {"role": "system", "content": AGGAGENT_SYSTEM_PROMPT}
    assert "4 independent attempts" in bodies[0]["messages"][1]["content"]


async def test_a_model_that_answers_at_once_just_answers() -> None:
    def direct(req: ScriptedRequest) -> str:
        return "\\boxed{42}"

    async with ScriptedServer(direct) as srv:
        c = OpenAICompatClient(srv.base_url, "scripted")
        try:
            out = await build_aggregator_agent(c).ainvoke(contract_input())
        finally:
            await c.aclose()
        assert len(srv.requests) == 1
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage", "AIMessage"]
    assert out["messages"][-1].content == "\\boxed{42}"


async def test_out_of_tool_steps_the_agent_is_asked_to_answer() -> None:
    def keeps_listing(req: ScriptedRequest) -> ScriptedReply:
        if not req.params.get("tools"):
            assert req.messages[-1] == {"role": "user", "content": FINAL_NOTE}
            return ScriptedReply(content=f"after {len(tool_results(req))} results: \\boxed{{43}}")
        return ScriptedReply(content="", tool_calls=(ScriptedToolCall("list_trajectories", {}),))

    async with ScriptedServer(keeps_listing) as srv:
        c = OpenAICompatClient(srv.base_url, "scripted")
        try:
            out = await build_aggregator_agent(c, max_tool_steps=2).ainvoke(contract_input())
        finally:
            await c.aclose()
        with_tools = [r for r in srv.requests if r.body.get("tools")]
        assert len(with_tools) == 2 and len(srv.requests) == 3
    assert out["messages"][-1].content == "after 2 results: \\boxed{43}"
    assert isinstance(out["messages"][-2], HumanMessage)


async def test_a_failed_model_call_fails_the_agent() -> None:
    async with ScriptedServer(agent_model, fail_when=lambda req: 400) as srv:
        c = OpenAICompatClient(srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1))
        try:
            with pytest.raises(AggregatorAgentError, match="HTTP 400"):
                await build_aggregator_agent(c).ainvoke(contract_input())
        finally:
            await c.aclose()


async def test_a_bad_tool_call_goes_back_to_the_model_as_an_error() -> None:
    def bad_then_answer(req: ScriptedRequest) -> ScriptedReply:
        results = tool_results(req)
        if not results:
            return ScriptedReply(
                content="",
                tool_calls=(
                    ScriptedToolCall("read_trajectory", {"index": 9}),
                    ScriptedToolCall("search_trajectories", {"pattern": "(", "regex": True}),
                ),
            )
        return ScriptedReply(content=" | ".join(r["content"] for r in results))

    async with ScriptedServer(bad_then_answer) as srv:
        c = OpenAICompatClient(srv.base_url, "scripted")
        try:
            out = await build_aggregator_agent(c).ainvoke(contract_input())
        finally:
            await c.aclose()
    text = out["messages"][-1].content
    assert "no trajectory 9; the indices are 0, 1, 2, 3" in text
    assert "not a valid regular expression" in text


def test_the_prompt_keeps_the_problem_and_its_instructions() -> None:
    conversation = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Bonjour"},
        HumanMessage(QUESTION),
    ]
    system, *earlier, problem = agent_prompt(conversation, ROUND, "SYSTEM")
    assert system == {"role": "system", "content": "SYSTEM"}
    assert earlier == [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Bonjour"},
    ]
    assert problem["content"].startswith(f"Problem:\n{QUESTION}\n\nInstructions that came")
    assert "Answer in French." in problem["content"]
    assert "(1 of them failed" in problem["content"]
    with pytest.raises(ValueError, match="no user message"):
        agent_prompt([{"role": "system", "content": "x"}], ROUND, "S")


async def test_without_a_runs_sampling_the_agent_derives_its_seed(
    client: tuple[ScriptedServer, OpenAICompatClient],
) -> None:
    """Built with a base seed, run alone: seeded as the answer round after round 0 would be."""
    srv, c = client
    await build_aggregator_agent(c, sampling=SamplingParams(seed=5)).ainvoke(contract_input())
    assert {r.body["seed"] for r in srv.requests} == {explorer_seed(5, 1, 0)}


def test_the_round_sampling_comes_from_the_config() -> None:
    default = SamplingParams(temperature=0.7, timeout=30.0, logprobs=True)
    assert run_sampling(None, default) is default
    got = run_sampling(
        {"configurable": {"pacore_sampling": {"temperature": 0.1, "max_tokens": 64, "model": "m"}}},
        default,
    )
    assert (got.temperature, got.max_tokens, got.logprobs) == (0.1, 64, False)
    assert got.timeout == 30.0  # not given: the agent's own


async def test_the_agent_refuses_what_it_cannot_run() -> None:
    with pytest.raises(TypeError, match="ChatClient or a LangChain chat model"):
        build_aggregator_agent(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tool_steps"):
        build_aggregator_agent(OpenAICompatClient("http://127.0.0.1:9/v1", "m"), max_tool_steps=0)
    agent = build_aggregator_agent(OpenAICompatClient("http://127.0.0.1:9/v1", "m"))
    with pytest.raises(ValueError, match="needs the last round's trajectories"):
        await agent.ainvoke({"messages": [{"role": "user", "content": "q"}], "trajectories": ()})


def test_tool_explorer_trajectories_are_read_with_their_tool_calls() -> None:
    used = Trajectory(
        round=0,
        index=0,
        content="\\boxed{5}",
        tool_calls=(ToolCallRecord(name="add", arguments={"a": 2, "b": 3}, output="5"),),
    )
    prompt = agent_prompt([HumanMessage("2+3?")], [used], "S")
    assert "1 independent attempts" in prompt[-1]["content"]


# --------------------------------------------------------- aggagent:N, the method on the seam
#
# ``build_aggagent_graph`` is ``build_pacore_graph`` with the agent as its aggregator. The
# scripted explorers (no tools offered) answer by sample index (0 and 2 say 41, the others
# 42); the agent lists the trajectories, reads the first that said 41, then answers.

N = 4
SEED = 7
ASKED = {"role": "user", "content": "What is 20 + 22?"}


def method_explorer(req: ScriptedRequest) -> ScriptedReply:
    answer = 41 if req.sample_index % 2 == 0 else 42
    return ScriptedReply(content=f"So \\boxed{{{answer}}}.", reasoning=f"sum {answer}")


def method_agent(req: ScriptedRequest) -> ScriptedReply:
    results = [m["content"] for m in tool_results(req)]
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


def method_model(req: ScriptedRequest) -> ScriptedReply:
    return method_agent(req) if req.params.get("tools") else method_explorer(req)


def words(reply: ScriptedReply) -> int:
    return count_tokens(reply.content) + count_tokens(reply.reasoning)


@pytest.fixture(scope="module")
def method_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(method_model, fail_when=AGENT_DOWN.fail_when).run_in_thread() as srv:
        yield srv


class AgentDown:
    """Refuses the agent's calls (those offering tools) while ``down``; by input, not order."""

    def __init__(self) -> None:
        self.down = False

    def fail_when(self, req: ScriptedRequest) -> int | None:
        return 400 if self.down and req.params.get("tools") else None


AGENT_DOWN = AgentDown()


@pytest.fixture
async def method_client(method_server: ScriptedServer) -> AsyncIterator[OpenAICompatClient]:
    method_server.reset_log()
    c = OpenAICompatClient(
        method_server.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1)
    )
    yield c
    await c.aclose()


def seeded() -> PaCoReConfig:
    return PaCoReConfig(sampling=SamplingParams(seed=SEED), retry=ModelRetryPolicy(max_attempts=1))


async def test_aggagent_runs_n_explorers_in_one_request_then_the_agent(
    method_server: ScriptedServer,
    method_client: OpenAICompatClient,
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    graph = build_aggagent_graph(
        method_client, N, config=seeded(), tracing=TraceOptions(tracer_provider=provider)
    )
    out = await graph.ainvoke(
        {"messages": [ASKED], "problem_id": "p"}, context={"temperature": 0.3}
    )
    result = out["result"]
    assert out["answer"] == result.answer == "20 + 22 = 42: \\boxed{42}."
    assert result.schedule == (N, 1) and [len(r) for r in result.rounds] == [N, 1]
    final = result.rounds[-1][0]
    assert final.id == "r1.0" and result.final is final
    assert result.extra["aggregator"] == "aggagent" and result.extra["chosen"] == "r1.0"
    assert final.reasoning == "41 is a slip" and final.model == "scripted"
    assert [c.name for c in final.tool_calls] == ["list_trajectories", "read_trajectory"]
    assert final.tool_calls[0].output.startswith("4 trajectories, 0 failed.")
    assert final.tool_calls[1].output.startswith("trajectory 0, characters 0-")
    assert final.references == (0, 1, 2, 3)
    # Tokens: every agent call's, summed; effective TTC counts them with the explorers'.
    agent_calls = [r.body for r in method_server.requests if r.body.get("tools")]
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
    # One n=N request for the explorers; the run's context sampling reached every call,
    # and the agent is seeded as PaCoRe's answer round.
    batch = [r.body for r in method_server.requests if not r.body.get("tools")]
    assert [b.get("n") for b in batch] == [N]
    assert {b["temperature"] for b in [*batch, *agent_calls]} == {0.3}
    assert {b["seed"] for b in agent_calls} == {explorer_seed(SEED, 1, 0)}
    # The answer message, as PaCoRe's: the run's answer id; the conversation recorded.
    answer = out["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.content == result.answer
    assert answer.id == answer_message_id(result.extra["run_id"])
    assert result.conversation == (ASKED,)
    # Traced as any PaCoRe run: the agent's step is the final round's explorer span, its
    # model calls named by the model, with the run's sampling.
    spans = exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names.count("invoke_agent aggagent") == 1
    (run,) = [s for s in spans if s.name == "invoke_workflow pacore"]  # every method's root
    assert run.attributes["pacore.schedule"] == (N, 1)
    assert run.attributes["gen_ai.request.temperature"] == 0.3
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert {s.name for s in chats} == {"chat scripted"}
    assert len(chats) == N + 3  # the n=N request's samples and the agent's three calls
    assert {s.attributes.get("gen_ai.request.temperature") for s in chats} == {0.3}
    assert not [s for s in spans if s.status.status_code is StatusCode.ERROR]


async def test_aggagent_progress_events_cover_both_rounds(
    method_client: OpenAICompatClient,
) -> None:
    graph = build_aggagent_graph(method_client, N, config=seeded(), tracing=False)
    events = [e async for e in graph.astream({"messages": [ASKED]}, stream_mode="custom")]
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


async def test_a_failed_agent_fails_its_round_and_resumes_asking_only_the_agent(
    method_server: ScriptedServer, method_client: OpenAICompatClient, tmp_path: Path
) -> None:
    """In a parent graph with a SQLite saver: the agent's model is down, then back."""
    parent = StateGraph(MessagesState)
    parent.add_node("aggagent", build_aggagent_graph(method_client, N, tracing=False))
    parent.add_edge(START, "aggagent")
    cfg: Any = {"configurable": {"thread_id": "agent-down"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.sqlite")) as saver:
        saver.serde = pacore_serde()
        app = parent.compile(checkpointer=saver)
        AGENT_DOWN.down = True
        try:
            failed = r"round 1: all 1 explorer calls failed.*aggregator agent.*HTTP 400"
            with pytest.raises(RoundFailedError, match=failed) as info:
                await app.ainvoke({"messages": [ASKED]}, cfg)
        finally:
            AGENT_DOWN.down = False
        assert info.value.round_index == 1 and len(info.value.errors) == 1
        assert [bool(r.body.get("tools")) for r in method_server.requests] == [False, True]
        method_server.reset_log()
        out = await app.ainvoke(None, cfg)
    # Only the agent again (its three calls); the explorer round is not asked again.
    assert [bool(r.body.get("tools")) for r in method_server.requests] == [True] * 3
    assert out["messages"][-1].content == "20 + 22 = 42: \\boxed{42}."
