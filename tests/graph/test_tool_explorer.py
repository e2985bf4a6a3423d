"""Explorers as subgraphs: the tool loop is a LangGraph graph, visible, streamed, checkpointed.

A tool-using explorer runs against the scripted server through LangChain's
``ChatOpenAI`` (real HTTP): the model asks for ``add``, gets the result from
LangGraph's ``ToolNode``, then answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.graph.tool_explorer import build_tool_explorer, static_tools
from pacore_graph.llm.langchain_client import aclose_chat_model, make_chat_model
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall
from pacore_graph.testing.fake_client import FakeChatClient
from pacore_graph.values.records import Trajectory

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "pacore_tool_explorer_xray.mmd"
QUESTION = {"messages": [{"role": "user", "content": "2+3?"}]}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def respond(req: ScriptedRequest) -> ScriptedReply:
    done = [m for m in req.messages if m.get("role") == "tool"]
    if not done:
        return ScriptedReply(content="", tool_calls=(ScriptedToolCall("add", {"a": 2, "b": 3}),))
    return ScriptedReply(content=f"\\boxed{{{done[-1]['content']}}}")


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer(respond, model="tm") as srv:
        yield srv


def tool_graph(srv: ScriptedServer, **kwargs: Any) -> tuple[Any, Any]:
    chat = make_chat_model(srv.base_url, "tm")
    explorer = build_tool_explorer(chat, static_tools([add]))
    return build_pacore_graph(explorer=explorer, tracing=False, **kwargs), chat


def test_explorer_subgraph_shows_in_xray_and_the_snapshot() -> None:
    chat = make_chat_model("http://127.0.0.1:9/v1", "tm")
    graph = build_pacore_graph(
        explorer=build_tool_explorer(chat, static_tools([add])), config=PaCoReConfig(rounds=[2])
    )
    mermaid = graph.get_graph(xray=True).draw_mermaid()
    for node in ("setup", "model", "tools", "finish"):
        assert f"explore\\3a{node}({node})" in mermaid, mermaid  # "explore:node" escaped
    if not SNAPSHOT.exists():  # first run writes it; review and commit the file
        SNAPSHOT.write_text(mermaid)
    assert mermaid == SNAPSHOT.read_text()
    # Without xray the parent's topology is unchanged.
    flat = graph.get_graph().draw_mermaid()
    assert "setup" not in flat and "explore(explore" in flat


async def test_tool_loop_steps_stream_with_subgraphs(server: ScriptedServer) -> None:
    graph, chat = tool_graph(server, config=PaCoReConfig(rounds=[2]))
    steps: list[tuple[str, str]] = []
    async for namespace, update in graph.astream(QUESTION, stream_mode="updates", subgraphs=True):
        if namespace:
            steps.extend((namespace[0].split(":")[0], node) for node in update)
    await aclose_chat_model(chat)
    nodes = [node for _, node in steps]
    # Three explorers (2 + the final 1), each: setup, model, tools, model, finish.
    assert nodes.count("setup") == 3 and nodes.count("finish") == 3
    assert nodes.count("model") == 6 and nodes.count("tools") == 3
    assert {ns for ns, _ in steps} == {"explore"}


async def test_tool_loop_is_checkpointed_and_uses_the_run_sampling(server: ScriptedServer) -> None:
    saver = InMemorySaver()
    config = PaCoReConfig(rounds=[2], sampling={"temperature": 0.4, "seed": 11})
    graph, chat = tool_graph(server, config=config, checkpointer=saver)
    thread: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    out = await graph.ainvoke(QUESTION, thread)
    await aclose_chat_model(chat)
    assert out["answer"] == "\\boxed{5}"
    assert all(
        len(t.tool_calls) == 1 and t.tool_calls[0].output == "5" for t in out["result"].trajectories
    )
    namespaces = {c.config["configurable"]["checkpoint_ns"] async for c in saver.alist(None)}
    assert any(ns.startswith("explore:") for ns in namespaces)  # the subgraph's own checkpoints
    bodies = [r.body for r in server.requests]
    assert {b["temperature"] for b in bodies} == {0.4}
    assert {b["seed"] for b in bodies} == {11, 12, 1011}  # explorer seeds, two calls each


async def test_tool_loop_limits_and_errors() -> None:
    def always_call(req: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(
            content="",
            tool_calls=(ScriptedToolCall("missing", {}), ScriptedToolCall("add", {"a": 1, "b": 1})),
        )

    async with ScriptedServer(always_call, model="tm") as srv:
        chat = make_chat_model(srv.base_url, "tm")
        explorer = build_tool_explorer(chat, static_tools([add]), max_steps=2)
        graph = build_pacore_graph(
            explorer=explorer, config=PaCoReConfig(rounds=[1]), tracing=False
        )
        result = await ainvoke_pacore(graph, "Q?")
        await aclose_chat_model(chat)
    first = result.rounds[0][0]
    assert first.truncated  # out of steps while still calling tools
    assert len(first.tool_calls) == 4  # two steps, two calls each
    assert [c.error is not None for c in first.tool_calls] == [True, False, True, False]
    assert "missing" in (first.tool_calls[0].error or "")


async def test_a_failed_model_step_has_the_status_as_error_type(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A step answered 500 gives its ``chat`` span and its explorer's span ``error.type`` 500.

    The upstream fails by input: explorer 1's second model call (seed 12,
    after its tool result). LangChain raises the ``openai`` SDK's error,
    whose text would give only the class name; the spans say the status,
    as a plain explorer's chat span does.
    """
    provider, exporter = traced

    def second_step_of_seed_12(req: ScriptedRequest) -> int | None:
        after_tool = any(m.get("role") == "tool" for m in req.messages)
        return 500 if req.seed == 12 and after_tool else None

    async with ScriptedServer(respond, model="tm", fail_when=second_step_of_seed_12) as srv:
        chat = make_chat_model(srv.base_url, "tm", retry=ModelRetryPolicy(max_attempts=1))
        graph = build_pacore_graph(
            explorer=build_tool_explorer(chat, static_tools([add])),
            config=PaCoReConfig(rounds=[2], sampling={"seed": 11}),
            tracing=TraceOptions(tracer_provider=provider),
        )
        result = await ainvoke_pacore(graph, "2+3?")
        await aclose_chat_model(chat)
    assert [t.failed for t in result.rounds[0]] == [False, True]
    assert result.answer == "\\boxed{5}"  # the other explorer carried the run
    spans = exporter.get_finished_spans()
    steps = [s for s in spans if s.name == "chat tm"]
    failed_steps = [s for s in steps if s.status.status_code is StatusCode.ERROR]
    assert len(steps) == 6 and len(failed_steps) == 1  # 2 steps for each of 3 explorers
    (step,) = failed_steps
    assert (step.attributes or {})["error.type"] == "500"
    assert not any("error.type" in (s.attributes or {}) for s in steps if s is not step)
    agents = {
        (s.attributes or {})["pacore.explorer.index"]: s
        for s in spans
        if s.name == "invoke_agent tool_explorer"
        and (s.attributes or {})["pacore.round.index"] == 0
    }
    assert agents[1].status.status_code is StatusCode.ERROR
    assert (agents[1].attributes or {})["error.type"] == "500"  # not "InternalServerError"
    assert "error.type" not in (agents[0].attributes or {})
    # The failed step sits under explorer 1's span.
    by_id = {s.context.span_id: s for s in spans}
    parent = step.parent
    while parent is not None and parent.span_id != agents[1].context.span_id:
        parent = by_id[parent.span_id].parent
    assert parent is not None


async def test_custom_explorer_gets_the_limiter_and_sampling() -> None:
    in_flight = 0
    peak = 0
    seen: list[ExploreTask] = []

    class Slow:
        async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            seen.append(task)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return Trajectory(round=task.round, index=task.index, content=f"a{task.index}")

    config = PaCoReConfig(
        rounds=[8], max_concurrency=3, sampling={"temperature": 0.2, "top_p": 0.5}
    )
    graph = build_pacore_graph(explorer=Slow(), config=config)
    await ainvoke_pacore(graph, "Q?")
    assert peak == 3
    assert {(t.params.temperature, t.params.top_p) for t in seen if t.params} == {(0.2, 0.5)}
    assert all(t.params is not None for t in seen)
    # Per-run settings reach a custom explorer too.
    seen.clear()
    await graph.ainvoke(QUESTION, context={"temperature": 0.9, "rounds": [2]})
    assert {t.params.temperature for t in seen if t.params} == {0.9}
    assert len(seen) == 3


def test_plain_chat_explorer_stays_a_plain_node() -> None:
    graph = build_pacore_graph(FakeChatClient(), config=PaCoReConfig(rounds=[2]))
    assert list(graph.get_subgraphs()) == []
