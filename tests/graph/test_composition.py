"""PaCoRe as a node of a user's graph: what must hold when it is composed.

Each case runs a parent ``StateGraph`` around the compiled PaCoRe graph, with
a real SQLite saver and the scripted server over HTTP (and ``ChatOpenAI`` /
``create_react_agent`` where the case is about them):

- a failed round resumes: ``ainvoke(None, config)`` asks again for exactly
  the trajectories that failed;
- the parent's context is the parent's: PaCoRe reads only its ``pacore``
  key, whatever type the context is;
- whatever an explorer or a compactor raises fails one trajectory;
- ``interrupt()`` in an explorer or around PaCoRe is a pause, not an error,
  and the resumed run's spans are in the run's trace;
- spans say what the run used (a tool explorer's model spans included); a
  custom explorer sharing the graph's limiter does not deadlock;
- a LangChain client's answer tokens stream through the parent, and the
  result the parent's state kept makes training episodes.

Only ``test_standalone_the_context_is_pacores_as_before`` runs PaCoRe on its
own: that is what it checks.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel
from typing_extensions import TypedDict

from pacore_graph import (
    ExploreTask,
    ModelRetryPolicy,
    PaCoReConfig,
    PaCoReResult,
    Round,
    RoundFailedError,
    Trajectory,
    build_pacore_graph,
)
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import chat_explorer
from pacore_graph.graph.checkpoint_types import pacore_serde
from pacore_graph.graph.messages_explorer import round_sampling
from pacore_graph.graph.tool_explorer import build_tool_explorer, static_tools
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.langchain_client import (
    LangChainChatClient,
    aclose_chat_model,
    make_chat_model,
)
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.rl import episodes_from_results
from pacore_graph.settings.config import SamplingParams
from pacore_graph.settings.per_run import RunSettings
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

ONE_TRY = ModelRetryPolicy(max_attempts=1)
QUESTION = "What is 17 + 25?"
SYNTHESIS = "Reference Responses"


class Outage:
    """What the scripted model refuses while it is down (by input: the round's prompt)."""

    def __init__(self) -> None:
        self.down: str | None = None
        self.status = 500

    def fail_when(self, req: ScriptedRequest) -> int | None:
        if self.down is not None and self.down in req.last_user:
            return self.status
        if req.seed == 13:  # one explorer of a seeded round: a bad request, once and for all
            return 400
        return None


def reply(req: ScriptedRequest) -> ScriptedReply:
    kind = "synthesis" if SYNTHESIS in req.last_user else "draft"
    return ScriptedReply(
        content=f"{kind} t={req.params.get('temperature')} #{req.sample_index}: 42",
        completion_tokens=4,
    )


@pytest.fixture(scope="module")
def outage() -> Outage:
    return Outage()


@pytest.fixture(scope="module")
def server(outage: Outage) -> Iterator[ScriptedServer]:
    with ScriptedServer(
        reply, model="m", fail_when=outage.fail_when, stream_words_per_chunk=1
    ).run_in_thread() as srv:
        yield srv


@pytest.fixture
async def client(server: ScriptedServer) -> AsyncIterator[OpenAICompatClient]:
    server.reset_log()
    found = OpenAICompatClient(server.base_url, "m", retry=ONE_TRY)
    yield found
    await found.aclose()


@pytest.fixture
async def saver(tmp_path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as plain:
        plain.serde = pacore_serde()  # PaCoRe's records, as docs/python.md says
        yield plain


class Workflow(MessagesState):
    plan: str
    verdict: str
    result: PaCoReResult  # PaCoRe's output key: the parent keeps (and checkpoints) its record


def workflow(pacore: Any, saver: Any, *, context_schema: Any = None, review: bool = False) -> Any:
    """planner -> pacore -> (review) -> verifier, checkpointed to ``saver``."""

    async def planner(state: Workflow) -> dict[str, Any]:
        return {"plan": "solve it carefully"}

    async def reviewer(state: Workflow) -> dict[str, Any]:
        approved = interrupt({"answer": state["messages"][-1].content})
        return {"verdict": f"reviewed: {approved}"}

    async def verifier(state: Workflow) -> dict[str, Any]:
        return {"verdict": state.get("verdict") or ("42" in state["messages"][-1].content and "ok")}

    g = StateGraph(Workflow, context_schema=context_schema)
    g.add_node("planner", planner)
    g.add_node("pacore", pacore)
    g.add_node("verifier", verifier)
    g.add_edge(START, "planner")
    g.add_edge("planner", "pacore")
    if review:
        g.add_node("review", reviewer)
        g.add_edge("pacore", "review")
        g.add_edge("review", "verifier")
    else:
        g.add_edge("pacore", "verifier")
    g.add_edge("verifier", END)
    return g.compile(checkpointer=saver)


def asked(server: ScriptedServer) -> list[tuple[str, int]]:
    """(draft | synthesis, n) of every request the server answered or refused."""
    return [
        (
            "synthesis" if SYNTHESIS in r.body["messages"][-1]["content"] else "draft",
            r.body.get("n", 1),
        )
        for r in server.requests
    ]


# ------------------------------------------------------------------ a failed round resumes


async def test_a_failed_round_resumes_asking_only_for_what_failed(
    server: ScriptedServer, outage: Outage, client: OpenAICompatClient, saver: Any
) -> None:
    app = workflow(build_pacore_graph(client, config=PaCoReConfig(rounds=[3, 2])), saver)
    cfg: Any = {"configurable": {"thread_id": "outage"}}
    outage.down = SYNTHESIS  # round 1 and on: the model is down
    try:
        with pytest.raises(RoundFailedError, match="round 1: all 2 explorer calls failed"):
            await app.ainvoke({"messages": [("user", QUESTION)]}, cfg)
    finally:
        outage.down = None
    first, *failed = asked(server)  # the client splits a failed n=2 request before it gives up
    assert first == ("draft", 3) and failed and {kind for kind, _ in failed} == {"synthesis"}
    server.reset_log()
    again = await app.ainvoke(None, cfg)  # the model is back
    # Round 0 is not asked again; round 1's two samples are one request again.
    assert asked(server) == [("synthesis", 2), ("synthesis", 1)]
    assert again["verdict"] == "ok" and "synthesis" in again["messages"][-1].content


async def test_a_failed_round_of_agent_explorers_asks_again_for_those_only(
    server: ScriptedServer, outage: Outage, saver: Any
) -> None:
    server.reset_log()
    model = make_chat_model(server.base_url, "m", api_key="k", retry=ONE_TRY)
    explorer = StateGraph(MessagesState)

    async def think(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"], config)]}

    explorer.add_node("think", think)
    explorer.add_edge(START, "think")
    pacore = build_pacore_graph(config=PaCoReConfig(rounds=[2, 2]), explorer=explorer.compile())
    app = workflow(pacore, saver)
    cfg: Any = {"configurable": {"thread_id": "agents"}}
    outage.down = SYNTHESIS
    try:
        with pytest.raises(RoundFailedError, match="round 1: all 2 explorer calls failed"):
            await app.ainvoke({"messages": [("user", QUESTION)]}, cfg)
    finally:
        outage.down = None
    assert asked(server) == [("draft", 1)] * 2 + [("synthesis", 1)] * 2
    server.reset_log()
    try:
        out = await app.ainvoke(None, cfg)
    finally:
        await aclose_chat_model(model)
    assert asked(server) == [("synthesis", 1)] * 3  # round 1's two again, then the final
    assert out["verdict"] == "ok"


# ------------------------------------------------------ the parent's context is the parent's


@dataclasses.dataclass(slots=True)
class SlottedContext:
    temperature: float = 0.0  # the planner's, not PaCoRe's
    rounds: list[int] = dataclasses.field(default_factory=lambda: [5, 5])
    pacore: Any = None


class ModelContext(BaseModel):
    temperature: float = 0.0
    pacore: dict[str, Any] | None = None


class DictContext(TypedDict, total=False):
    temperature: float
    pacore: dict[str, Any]


@pytest.mark.parametrize(
    ("schema", "context", "expected"),
    [
        (SlottedContext, SlottedContext(), (1.0, [(2, 1.0), (1, 1.0)])),
        (SlottedContext, SlottedContext(pacore={"temperature": 0.2}), (0.2, None)),
        (ModelContext, ModelContext(), (1.0, None)),
        (ModelContext, ModelContext(pacore={"rounds": [1]}), (1.0, [(1, 1.0), (1, 1.0)])),
        (DictContext, {"temperature": 0.0, "pacore": {"temperature": 0.3}}, (0.3, None)),
        (DictContext, {"temperature": 0.0}, (1.0, None)),
        (None, None, (1.0, None)),
        (SlottedContext, SlottedContext(pacore=RunSettings(temperature=0.7)), (0.7, None)),
    ],
    ids=[
        "slots",
        "slots-pacore",
        "pydantic",
        "pydantic-rounds",
        "typeddict-pacore",
        "typeddict",
        "none",
        "own-type",
    ],
)
async def test_pacore_reads_only_its_own_key_of_a_parents_context(
    server: ScriptedServer,
    client: OpenAICompatClient,
    saver: Any,
    schema: Any,
    context: Any,
    expected: tuple[float, list[tuple[int, float]] | None],
) -> None:
    app = workflow(
        build_pacore_graph(client, config=PaCoReConfig(rounds=[2])), saver, context_schema=schema
    )
    cfg: Any = {"configurable": {"thread_id": f"ctx-{id(context)}"}}
    out = await app.ainvoke({"messages": [("user", QUESTION)]}, cfg, context=context)
    temperature, shape = expected
    sent = [(r.body.get("n", 1), r.body["temperature"]) for r in server.requests]
    assert {t for _, t in sent} == {temperature}
    assert sent == (shape or [(2, temperature), (1, temperature)])
    assert out["verdict"] == "ok"


async def test_standalone_the_context_is_pacores_as_before(client: OpenAICompatClient) -> None:
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    await graph.ainvoke({"messages": [("user", QUESTION)]}, context={"temperature": 0.2})
    assert {r.body["temperature"] for r in client_requests(client)} == {0.2}


def client_requests(client: OpenAICompatClient) -> list[Any]:
    return _server_of[client.base_url].requests


_server_of: dict[str, ScriptedServer] = {}


@pytest.fixture(autouse=True)
def _remember(server: ScriptedServer) -> None:
    _server_of[server.base_url] = server


# ------------------------------------------------- a failure is one trajectory's, not the run's


class Flaky:
    """A custom explorer with a bug for explorer 1 of round 0."""

    name = "flaky"

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        if task.round == 0 and task.index == 1:
            return {}["boom"]  # type: ignore[no-any-return]
        return Trajectory(round=task.round, index=task.index, content=f"42 from {task.index}")


async def test_an_explorers_exception_fails_its_trajectory_and_span_only(
    traced: tuple[TracerProvider, InMemorySpanExporter], saver: Any
) -> None:
    provider, exporter = traced
    pacore = build_pacore_graph(
        config=PaCoReConfig(rounds=[3]),
        explorer=Flaky(),
        tracing=TraceOptions(tracer_provider=provider),
    )
    out = await workflow(pacore, saver).ainvoke(
        {"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "flaky"}}
    )
    assert out["verdict"] == "ok"
    state = out["messages"][-1]
    assert "42" in state.content
    spans = exporter.get_finished_spans()
    failed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    (span,) = failed  # the one explorer; not its round, not the run
    assert span.name == "invoke_agent flaky" and span.attributes["error.type"] == "KeyError"
    assert span.events[0].attributes["exception.type"] == "KeyError"
    assert not any("unknown" in str(s.attributes.get("gen_ai.request.model")) for s in spans)


async def test_one_chatopenai_explorer_failing_fails_one_trajectory(
    server: ScriptedServer, saver: Any
) -> None:
    """Three explorers calling ChatOpenAI with their round's seed; the one seeded 13 gets a 400."""
    server.reset_log()
    model = make_chat_model(server.base_url, "m", api_key="k", retry=ONE_TRY)

    async def answer(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        sampling = round_sampling(config) or {}
        bound = model.bind(seed=sampling.get("seed"), temperature=sampling.get("temperature"))
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    explorer = StateGraph(MessagesState)
    explorer.add_node("answer", answer)
    explorer.add_edge(START, "answer")
    pacore = build_pacore_graph(
        config=PaCoReConfig(rounds=[3], sampling=SamplingParams(seed=12)),
        explorer=explorer.compile(),
    )
    cfg: Any = {"configurable": {"thread_id": "one-of-three"}}
    try:
        out = await workflow(pacore, saver).ainvoke({"messages": [("user", QUESTION)]}, cfg)
    finally:
        await aclose_chat_model(model)
    assert out["verdict"] == "ok"
    result = out["result"]  # PaCoRe's record, through the parent's state and saver
    first = result.rounds[0]
    assert [t.failed for t in first] == [False, True, False]  # seeds 12, 13, 14
    assert "Error: Error code: 400" in (first[1].error or "")  # its type, then its message
    assert result.answer.startswith("synthesis")


# ----------------------------------------------------------------- interrupts are pauses


async def test_an_interrupt_in_an_explorer_is_a_pause_and_the_trace_goes_on(
    server: ScriptedServer,
    client: OpenAICompatClient,
    saver: Any,
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced

    async def ask(state: MessagesState) -> dict[str, Any]:
        last = str(state["messages"][-1].content)
        if SYNTHESIS in last:
            return {"messages": [AIMessage("synthesis: 42")]}
        approved = interrupt({"draft": "42"})
        return {"messages": [AIMessage(f"draft {approved}: 42")]}

    explorer = StateGraph(MessagesState)
    explorer.add_node("ask", ask)
    explorer.add_edge(START, "ask")
    pacore = build_pacore_graph(
        config=PaCoReConfig(rounds=[1]),
        explorer=explorer.compile(name="asker"),
        tracing=TraceOptions(tracer_provider=provider),
    )
    app = workflow(pacore, saver)
    cfg: Any = {"configurable": {"thread_id": "pause"}}
    paused = await app.ainvoke({"messages": [("user", QUESTION)]}, cfg)
    assert paused["__interrupt__"][0].value == {"draft": "42"}
    before = exporter.get_finished_spans()
    assert before and not [s for s in before if s.status.status_code is StatusCode.ERROR]
    assert any(s.attributes.get("pacore.paused") for s in before)
    out = await app.ainvoke(Command(resume="approved"), cfg)
    assert out["verdict"] == "ok" and out["messages"][-1].content == "synthesis: 42"
    spans = exporter.get_finished_spans()
    after = spans[len(before) :]
    assert {s.context.trace_id for s in spans} == {before[0].context.trace_id}  # one trace
    names = [s.name for s in after]
    assert names.count("invoke_agent asker") == 2  # the resumed explorer and the final one
    assert any(s.attributes.get("pacore.resumed") for s in after)
    assert not [s for s in spans if s.status.status_code is StatusCode.ERROR]


async def test_an_interrupt_around_pacore_leaves_its_trace_clean(
    server: ScriptedServer,
    client: OpenAICompatClient,
    saver: Any,
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    pacore = build_pacore_graph(
        client, config=PaCoReConfig(rounds=[2]), tracing=TraceOptions(tracer_provider=provider)
    )
    app = workflow(pacore, saver, review=True)
    cfg: Any = {"configurable": {"thread_id": "review"}}
    paused = await app.ainvoke({"messages": [("user", QUESTION)]}, cfg)
    assert "__interrupt__" in paused and len(server.requests) == 2
    out = await app.ainvoke(Command(resume="fine"), cfg)
    assert out["verdict"] == "reviewed: fine" and len(server.requests) == 2  # PaCoRe not rerun
    spans = exporter.get_finished_spans()
    assert not [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert [s.name for s in spans].count("invoke_workflow pacore") == 1


# --------------------------------------------------------- spans say what the run used


async def test_spans_carry_the_runs_own_settings(
    client: OpenAICompatClient, saver: Any, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = traced
    pacore = build_pacore_graph(
        client, config=PaCoReConfig(rounds=[4]), tracing=TraceOptions(tracer_provider=provider)
    )
    app = workflow(pacore, saver, context_schema=DictContext)
    context: DictContext = {"temperature": 0.0, "pacore": {"rounds": [2, 2], "temperature": 0.2}}
    cfg: Any = {"configurable": {"thread_id": "spans"}}
    await app.ainvoke({"messages": [("user", QUESTION)]}, cfg, context=context)
    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == "invoke_workflow pacore"]
    assert run.attributes["pacore.rounds"] == (2, 2)
    assert run.attributes["pacore.schedule"] == (2, 2, 1)
    assert run.attributes["gen_ai.request.temperature"] == 0.2
    chats = [s for s in spans if s.name == "chat m"]
    assert len(chats) == 5 and {s.attributes["gen_ai.request.temperature"] for s in chats} == {0.2}


# ----------------------------------------------- a custom explorer sharing the graph's limiter


@tool
def add(a: int, b: int) -> int:
    """Add two integers (offered to the tool loop; this scripted model answers without it)."""
    return a + b


async def test_a_tool_explorers_model_spans_carry_their_rounds_sampling(
    server: ScriptedServer, saver: Any, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    """A ChatOpenAI tool loop per explorer, each round with its own model and temperature."""
    provider, exporter = traced
    server.reset_log()
    chat = make_chat_model(server.base_url, "m", api_key="k", retry=ONE_TRY)
    explorer = build_tool_explorer(chat, static_tools([add]), name="looper")
    pacore = build_pacore_graph(
        explorer=explorer,
        config=PaCoReConfig(
            rounds=[Round(2, temperature=0.4, model="small")],
            final=Round(1, temperature=0.1, max_tokens=64, model="large"),
        ),
        tracing=TraceOptions(tracer_provider=provider),
    )
    cfg: Any = {"configurable": {"thread_id": "tool-spans"}}
    try:
        out = await workflow(pacore, saver).ainvoke({"messages": [("user", QUESTION)]}, cfg)
    finally:
        await aclose_chat_model(chat)
    assert out["verdict"] == "ok"
    sent = sorted((r.body["model"], r.body["temperature"]) for r in server.requests)
    assert sent == [("large", 0.1), ("small", 0.4), ("small", 0.4)]
    spans = exporter.get_finished_spans()
    chats = sorted(
        ((s.name, s.attributes["gen_ai.request.temperature"]) for s in spans if "chat" in s.name),
    )
    assert chats == [("chat large", 0.1), ("chat small", 0.4), ("chat small", 0.4)]
    (large,) = [s for s in spans if s.name == "chat large"]
    assert large.attributes["gen_ai.request.max_tokens"] == 64
    agents = [s for s in spans if s.name == "invoke_agent looper"]
    assert sorted(s.attributes["gen_ai.request.model"] for s in agents) == [
        "large",
        "small",
        "small",
    ]
    assert not any("unknown" in str(s.attributes.get("gen_ai.request.model")) for s in spans)


async def test_a_custom_explorer_sharing_the_limiter_cannot_deadlock(
    client: OpenAICompatClient, saver: Any
) -> None:
    """The graph holds a unit per trajectory around the wrapper; the wrapped chat explorer's
    batcher holds the same limiter: with K above its capacity this waited forever."""
    config = PaCoReConfig(rounds=[4], max_concurrency=2)
    limiter = SequenceLimiter(2)
    inner = chat_explorer(client, limiter, config)

    class Checked:
        name = "checked"

        async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
            found = await inner.explore(task, config)
            return replace(found, content=found.content + " (checked)")

    pacore = build_pacore_graph(config=config, explorer=Checked(), limiter=limiter)
    cfg: Any = {"configurable": {"thread_id": "limiter"}}
    app = workflow(pacore, saver)
    out = await asyncio.wait_for(app.ainvoke({"messages": [("user", QUESTION)]}, cfg), timeout=30)
    assert out["verdict"] == "ok"
    result = out["result"]  # PaCoRe's record, through the parent's state and saver
    assert all(t.content.endswith("(checked)") for t in result.rounds[0])
    assert limiter.in_use() == 0


# ------------------------------------- tokens stream from a LangChain client; episodes export


async def test_a_langchain_client_streams_the_answer_through_the_parent(
    server: ScriptedServer, saver: Any
) -> None:
    """PaCoRe over ``LangChainChatClient(ChatOpenAI)`` as a node: the final answer's tokens
    reach the parent's ``messages`` stream as chunks of the answer message."""
    server.reset_log()
    chat = make_chat_model(server.base_url, "m", api_key="k", retry=ONE_TRY)
    pacore = build_pacore_graph(LangChainChatClient(chat), config=PaCoReConfig(rounds=[2]))
    cfg: Any = {"configurable": {"thread_id": "stream"}}
    chunks: list[Any] = []
    try:
        async for _ns, (message, _meta) in workflow(pacore, saver).astream(
            {"messages": [("user", QUESTION)]}, cfg, stream_mode="messages", subgraphs=True
        ):
            if isinstance(message, AIMessageChunk):
                chunks.append(message)
        state = await workflow(pacore, saver).aget_state(cfg)
    finally:
        await aclose_chat_model(chat)
    answer = state.values["messages"][-1]
    assert len(chunks) > 1 and {c.id for c in chunks} == {answer.id}  # deltas, not one message
    assert "".join(str(c.content) for c in chunks) == answer.content
    assert answer.content.startswith("synthesis") and state.values["verdict"] == "ok"
    assert [bool(r.body.get("stream")) for r in server.requests] == [False, True]


async def test_episodes_come_from_the_result_a_parent_graph_kept(
    client: OpenAICompatClient, saver: Any
) -> None:
    """``episodes_from_results`` on the record the parent's state (and saver) holds."""
    pacore = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    cfg: Any = {"configurable": {"thread_id": "episodes"}}
    await workflow(pacore, saver).ainvoke({"messages": [("user", QUESTION)]}, cfg)
    saved = (await workflow(pacore, saver).aget_state(cfg)).values["result"]  # from SQLite
    assert saved.conversation == ({"role": "user", "content": QUESTION},)
    episodes = episodes_from_results([saved], ground_truths={saved.extra["run_id"]: "42"})
    assert [(e.round, e.index) for e in episodes] == [(0, 0), (0, 1), (1, 0)]
    assert all(e.reward == 1.0 for e in episodes)  # every message ends in 42
    final = episodes[-1]
    assert SYNTHESIS in str(final.prompt[-1]["content"])
    assert final.completion.startswith("synthesis")
