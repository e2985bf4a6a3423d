"""Any messages graph as an explorer or as the aggregator: agents as they are, over HTTP.

``explorer=create_agent(ChatOpenAI, tools)`` (langchain.agents, or LangGraph's
``create_react_agent``) must run as given: the
round's prompt in, its last AI message the trajectory's answer, its tokens
from usage metadata, its tool calls recorded. A graph reading
``trajectories`` may replace the final synthesis round; its record is the
final round of width 1.
"""

from __future__ import annotations

import json
import operator
import warnings
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pacore_graph import PaCoReConfig, Round, Trajectory, ainvoke_pacore, build_pacore_graph
from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.graph.messages_explorer import (
    MessagesExplorer,
    round_sampling,
    trajectory_from_messages,
)
from pacore_graph.llm.langchain_client import aclose_chat_model, make_chat_model
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall

QUESTION = "What is 17 + 25?"
TASK = ExploreTask(
    run_id="r", problem_id=None, round=1, index=2, width=3, messages=(), references=(0, 1)
)


def test_a_trajectory_is_read_from_the_messages_a_graph_added() -> None:
    call = {"name": "add", "args": {"a": 17, "b": 25}, "id": "c1"}
    produced = [
        AIMessage("", tool_calls=[call], usage_metadata=_usage(10, 4)),
        ToolMessage("42", tool_call_id="c1"),
        AIMessage(
            "It is 42.",
            additional_kwargs={"reasoning_content": "17 + 25 = 42"},
            response_metadata={"finish_reason": "stop", "model_name": "m-1"},
            usage_metadata=_usage(20, 6),
        ),
    ]
    t = trajectory_from_messages(TASK, produced, latency_s=0.5)
    assert (t.round, t.index, t.references) == (1, 2, (0, 1))
    assert (t.content, t.reasoning, t.finish_reason, t.model) == (
        "It is 42.",
        "17 + 25 = 42",
        "stop",
        "m-1",
    )
    assert (t.prompt_tokens, t.completion_tokens, t.latency_s) == (30, 10, 0.5)
    (record,) = t.tool_calls
    assert (record.name, dict(record.arguments), record.output, record.error) == (
        "add",
        {"a": 17, "b": 25},
        "42",
        None,
    )
    failed = [
        AIMessage("", tool_calls=[call]),
        ToolMessage("boom", tool_call_id="c1", status="error"),
        AIMessage("gave up"),
    ]
    assert trajectory_from_messages(TASK, failed).tool_calls[0].error == "boom"
    assert trajectory_from_messages(TASK, failed, answer="7").content == "7"
    with pytest.raises(ValueError, match="no AI message"):
        trajectory_from_messages(TASK, [HumanMessage("hi")])


def _usage(i: int, o: int) -> Any:
    return {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}


def react(req: ScriptedRequest) -> ScriptedReply:
    """Call ``add`` first, answer once its result came back; the synthesis answers directly."""
    tool_results = [m for m in req.messages if m.get("role") == "tool"]
    if "Reference Responses" in req.last_user:
        return ScriptedReply(content="Having read the references: 42.", completion_tokens=5)
    if not tool_results:
        return ScriptedReply(
            content="",
            tool_calls=(ScriptedToolCall("add", {"a": 17, "b": 25 + req.sample_index}),),
            completion_tokens=7,
        )
    return ScriptedReply(
        content=f"The tool says {tool_results[-1]['content']}.", completion_tokens=9
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(react, model="m").run_in_thread() as srv:
        yield srv


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def langchain_agent(model: Any, tools: list[Any], name: str) -> Any:
    from langchain.agents import create_agent

    return create_agent(model, tools, name=name)


def langgraph_agent(model: Any, tools: list[Any], name: str) -> Any:
    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0; still there
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, name=name)


@pytest.mark.parametrize("make_agent", [langchain_agent, langgraph_agent])
async def test_an_agent_is_an_explorer_as_it_is(
    server: ScriptedServer,
    traced: tuple[TracerProvider, InMemorySpanExporter],
    make_agent: Callable[..., Any],
) -> None:
    provider, exporter = traced
    server.reset_log()
    model = make_chat_model(server.base_url, "m", api_key="k")
    agent = make_agent(model, [add], name="adder")
    graph = build_pacore_graph(
        config=PaCoReConfig(rounds=[2]),
        explorer=agent,
        tracing=TraceOptions(tracer_provider=provider),
    )
    try:
        result = await ainvoke_pacore(graph, QUESTION)
    finally:
        await aclose_chat_model(model)
    first, final = result.rounds
    assert [t.content for t in first] == ["The tool says 42.", "The tool says 42."]
    assert all(t.completion_tokens == 7 + 9 for t in first)  # both model calls, from usage
    assert all(len(t.tool_calls) == 1 and t.tool_calls[0].output == "42" for t in first)
    assert final[0].content == "Having read the references: 42." and not final[0].tool_calls
    assert result.answer == "Having read the references: 42."
    assert result.effective_ttc == 2 * 16 + 5
    # Each explorer ran the agent's loop over HTTP: 2 calls per explorer, 1 for the final.
    assert len(server.requests) == 2 * 2 + 1
    agents = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent adder"]
    assert len(agents) == 3 and all(s.attributes["pacore.tool_calls"] in (0, 1) for s in agents)
    assert all(s.attributes.get("gen_ai.request.model") != "unknown" for s in agents)


async def test_a_messages_graph_gets_its_rounds_sampling_in_its_config(
    server: ScriptedServer,
) -> None:
    """A graph that honours the round's settings reads them from its config."""
    seen: list[dict[str, Any]] = []

    async def answer(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        sampling = round_sampling(config)
        assert sampling is not None
        seen.append(sampling)
        return {"messages": [AIMessage(f"t={sampling['temperature']} m={sampling['model']}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    explorer = builder.compile(name="sampler")
    graph = build_pacore_graph(
        config=PaCoReConfig(
            rounds=[Round(2, temperature=0.3, model="small")], final={"model": "big"}
        ),
        explorer=explorer,
    )
    result = await ainvoke_pacore(graph, QUESTION)
    assert [t.content for t in result.rounds[0]] == ["t=0.3 m=small"] * 2
    assert result.answer == "t=1.0 m=big"
    assert sorted(s["seed"] is None for s in seen) == [True] * 3
    assert {s["max_tokens"] for s in seen} == {None}


class Judged(MessagesState):
    trajectories: tuple[Trajectory, ...]
    votes: Annotated[list[str], operator.add]


async def test_a_graph_reading_the_trajectories_is_the_aggregator(
    server: ScriptedServer, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = traced
    server.reset_log()

    async def judge(state: Judged) -> dict[str, Any]:
        texts = [t.content for t in state["trajectories"] if not t.failed]
        usage = _usage(len(texts), 2)
        verdict = f"{len(texts)} agree: {texts[0]}"
        return {"messages": [AIMessage(verdict, usage_metadata=usage)], "votes": texts}

    builder = StateGraph(Judged)
    builder.add_node("judge", judge)
    builder.add_edge(START, "judge")
    aggregator = builder.compile(name="judge")
    model = make_chat_model(server.base_url, "m", api_key="k")
    graph = build_pacore_graph(
        config=PaCoReConfig(rounds=[3]),
        explorer=langchain_agent(model, [add], "adder"),
        aggregator=aggregator,
        tracing=TraceOptions(tracer_provider=provider),
    )
    assert "aggregate" in graph.get_graph().nodes
    try:
        result = await ainvoke_pacore(graph, QUESTION)
    finally:
        await aclose_chat_model(model)
    _, final = result.rounds
    assert result.schedule == (3, 1) and len(final) == 1
    assert final[0].content == "3 agree: The tool says 42." == result.answer
    assert final[0].references == (0, 1, 2) and final[0].completion_tokens == 2
    assert result.effective_ttc == 3 * 16 + 2
    assert len(server.requests) == 3 * 2  # the explorers only: the judge called no model
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("invoke_agent judge") == 1
    assert json.loads(json.dumps(result.to_dict()))["rounds"][1][0]["content"] == result.answer


async def test_what_is_neither_explorer_nor_aggregator_is_refused() -> None:
    with pytest.raises(TypeError, match="explorer must be a compiled graph or Runnable"):
        build_pacore_graph(config=PaCoReConfig(rounds=[1]), explorer=object())
    model = make_chat_model("http://127.0.0.1:9/v1", "m", api_key="k")
    with pytest.raises(TypeError, match="a chat model cannot be the aggregator"):
        build_pacore_graph(explorer=MessagesExplorer(model), aggregator=model)
    with pytest.raises(TypeError, match="aggregator must have aggregate"):
        build_pacore_graph(explorer=MessagesExplorer(model), aggregator=object())
