"""Spans of a PaCoRe run, captured with the SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pacore_graph import (
    PaCoReConfig,
    RoundFailedError,
    SamplingParams,
    ainvoke_pacore,
    build_pacore_graph,
)
from pacore_graph.otel.spans import CAPTURE_CONTENT_ENV, TraceOptions
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

SECRET = "sk-very-secret-key"


def reply(call: FakeCall) -> FakeReply:
    n_refs = call.last_user.count("Reference ")
    return FakeReply(
        content=f"<think>t</think>msg {n_refs}-{call.sample_index}",
        reasoning=None,
        completion_tokens=5 + call.sample_index,
    )


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_span_tree_attributes_and_links_for_a_two_round_run(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    graph = build_pacore_graph(
        FakeChatClient(reply=reply, model="m1"),
        config=PaCoReConfig(rounds=[3, 2], sampling=SamplingParams(max_tokens=64)),
        tracing=TraceOptions(tracer_provider=provider),
    )
    result = await ainvoke_pacore(graph, "Q?")
    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "invoke_workflow pacore")
    rounds = sorted(
        by_name(spans, "pacore.round"), key=lambda s: s.attributes["pacore.round.index"]
    )
    chats = by_name(spans, "chat m1")
    compacts = by_name(spans, "pacore.compact conclusion")
    assert len(rounds) == 3 and len(chats) == 3 + 2 + 1 and len(compacts) == 3
    run_id = result.extra["run_id"]
    # One trace; rounds under the run; chats and compactions under their round.
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    assert all(r.parent.span_id == run.context.span_id for r in rounds)
    round_ids = {r.context.span_id: r.attributes["pacore.round.index"] for r in rounds}
    assert sorted(round_ids[c.parent.span_id] for c in chats) == [0, 0, 0, 1, 1, 2]
    assert all(c.parent.span_id in round_ids for c in compacts)
    # Run attributes.
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["pacore.run_id"] == run_id
    assert run.attributes["gen_ai.conversation.id"] == run_id
    assert tuple(run.attributes["pacore.rounds"]) == (3, 2)
    assert run.attributes["pacore.effective_ttc"] == result.effective_ttc
    assert run.attributes["pacore.answer.length"] == len(result.answer)
    # Round attributes.
    assert [r.attributes["pacore.round.k"] for r in rounds] == [3, 2, 1]
    assert [r.attributes["pacore.round.input_messages"] for r in rounds] == [0, 3, 2]
    assert rounds[1].attributes["pacore.round.input_chars"] == sum(
        len(t.message or "") for t in result.rounds[0]
    )
    # Chat attributes follow the GenAI conventions.
    chat = chats[0]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    # The fake client has no server: it speaks the API but is not OpenAI.
    assert chat.attributes["gen_ai.provider.name"] == "openai_compatible"
    assert chat.attributes["gen_ai.request.model"] == "m1"
    assert chat.attributes["gen_ai.request.temperature"] == 1.0
    assert chat.attributes["gen_ai.request.top_p"] == 1.0
    assert chat.attributes["gen_ai.request.max_tokens"] == 64
    assert chat.attributes["gen_ai.conversation.id"] == run_id
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == result.effective_ttc
    assert all(c.attributes["gen_ai.usage.input_tokens"] > 0 for c in chats)
    # Message passing as links: round 1 explorers link to all three round-0 spans,
    # in prompt order, with the position as an attribute.
    chat_by_id = {c.context.span_id: c for c in chats}
    for c in chats:
        idx = round_ids[c.parent.span_id]
        if idx == 0:
            assert not c.links
            continue
        linked = [chat_by_id[link.context.span_id] for link in c.links]
        assert all(round_ids[p.parent.span_id] == idx - 1 for p in linked)
        refs = result.rounds[idx][0].references
        assert [link.attributes["pacore.reference.position"] for link in c.links] == list(
            range(1, len(refs) + 1)
        )
        assert [p.attributes["pacore.explorer.index"] for p in linked] == list(refs)
    # Compaction sizes.
    c0 = next(c for c in compacts if round_ids[c.parent.span_id] == 0)
    assert (
        c0.attributes["pacore.compact.chars_before"] > c0.attributes["pacore.compact.chars_after"]
    )
    # No content unless opted in.
    assert not any("gen_ai.input.messages" in s.attributes for s in spans)
    assert not any("gen_ai.output.messages" in s.attributes for s in spans)


async def test_failed_call_marks_its_span_and_a_failed_run_ends_its_spans(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced

    def flaky(call: FakeCall) -> FakeReply:
        if call.seed == 1:  # explorer 1 of round 0
            return FakeReply(content="", error="HTTP 500: boom")
        if "Reference" in call.last_user:  # every final-round call fails
            return FakeReply(content="", error="HTTP 503: down")
        return reply(call)

    graph = build_pacore_graph(
        FakeChatClient(reply=flaky),
        config=PaCoReConfig(rounds=[3], batch_samples=False, sampling=SamplingParams(seed=0)),
        tracing=TraceOptions(tracer_provider=provider),
    )
    with pytest.raises(RoundFailedError):
        await ainvoke_pacore(graph, "Q?")
    spans = exporter.get_finished_spans()
    chats = by_name(spans, "chat fake")
    failed = [c for c in chats if c.status.status_code == StatusCode.ERROR]
    assert len(chats) == 4 and len(failed) == 2
    assert any("boom" in (c.status.description or "") for c in failed)
    # Low-cardinality: the status code, not the text up to its first colon ("HTTP 500 from http").
    assert sorted(c.attributes["error.type"] for c in failed) == ["500", "503"]
    (run,) = by_name(spans, "invoke_workflow pacore")
    assert run.status.status_code == StatusCode.ERROR
    assert "all 1 explorer calls failed" in (run.status.description or "")
    rounds = by_name(spans, "pacore.round")
    assert len(rounds) == 2 and rounds[-1].status.status_code == StatusCode.ERROR


async def test_content_is_captured_only_when_opted_in(
    traced: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = traced
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    graph = build_pacore_graph(
        FakeChatClient(reply=reply),
        config=PaCoReConfig(rounds=[2]),
        tracing=TraceOptions(tracer_provider=provider),
    )
    await ainvoke_pacore(graph, "What is the secret question?")
    chats = by_name(exporter.get_finished_spans(), "chat")
    inputs = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert inputs[0]["role"] == "user"
    assert inputs[0]["parts"][0]["content"] == "What is the secret question?"
    outputs = json.loads(chats[0].attributes["gen_ai.output.messages"])
    assert outputs[0]["parts"][-1]["content"].startswith("<think>t</think>msg")
    everything = json.dumps([dict(s.attributes) for s in exporter.get_finished_spans()])
    assert SECRET not in everything
    # An explicit False wins over the environment.
    exporter.clear()
    graph = build_pacore_graph(
        FakeChatClient(reply=reply),
        config=PaCoReConfig(rounds=[2]),
        tracing=TraceOptions(tracer_provider=provider, capture_content=False),
    )
    await ainvoke_pacore(graph, "Q?")
    assert not any("gen_ai.input.messages" in s.attributes for s in exporter.get_finished_spans())


async def test_tracing_disabled_makes_no_spans(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    graph = build_pacore_graph(
        FakeChatClient(reply=reply),
        config=PaCoReConfig(rounds=[2]),
        tracing=TraceOptions(enabled=False, tracer_provider=provider),
    )
    await ainvoke_pacore(graph, "Q?")
    assert exporter.get_finished_spans() == ()


async def test_tool_explorer_spans_go_to_the_runs_provider(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """``invoke_agent``, per-step ``chat`` and ``execute_tool`` spans nest under the round."""
    from langchain_core.tools import tool

    from pacore_graph.graph.tool_explorer import build_tool_explorer, static_tools
    from pacore_graph.llm.langchain_client import aclose_chat_model, make_chat_model
    from pacore_graph.testing import ScriptedReply, ScriptedServer, ScriptedToolCall

    provider, exporter = traced

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def respond(req: object) -> ScriptedReply:
        done = [m for m in req.messages if m.get("role") == "tool"]  # type: ignore[attr-defined]
        if not done:
            call = ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})
            return ScriptedReply(content="", tool_calls=(call,))
        return ScriptedReply(content=f"\\boxed{{{done[-1]['content']}}}")

    async with ScriptedServer(respond, model="tm") as srv:
        chat = make_chat_model(srv.base_url, "tm")
        explorer = build_tool_explorer(chat, static_tools([add]))
        graph = build_pacore_graph(
            explorer=explorer,
            config=PaCoReConfig(rounds=[2]),
            tracing=TraceOptions(tracer_provider=provider, capture_content=True),
        )
        result = await ainvoke_pacore(graph, "2+3?")
        await aclose_chat_model(chat)
    assert result.answer == "\\boxed{5}"
    spans = exporter.get_finished_spans()
    agents = by_name(spans, "invoke_agent tool_explorer")
    tools = by_name(spans, "execute_tool add")
    steps = by_name(spans, "chat tm")
    assert len(agents) == 3 and len(tools) == 3 and len(steps) == 6  # 2 model calls each
    agent_ids = {a.context.span_id for a in agents}
    # Tool and step spans sit (through the subgraph) under an explorer span.
    by_id = {s.context.span_id: s for s in spans}

    def ancestor_is_agent(span: ReadableSpan) -> bool:
        while span.parent is not None:
            if span.parent.span_id in agent_ids:
                return True
            span = by_id[span.parent.span_id]
        return False

    assert all(ancestor_is_agent(s) for s in tools + steps)
    assert all(t.attributes["gen_ai.operation.name"] == "execute_tool" for t in tools)
    assert json.loads(tools[0].attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in steps) == result.effective_ttc
    assert all(a.attributes["pacore.tool_calls"] == 1 for a in agents)
