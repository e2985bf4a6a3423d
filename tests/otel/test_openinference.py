"""What Phoenix and Langfuse read first: OpenInference kinds, the run's input and output,
the references each explorer read, and a low-cardinality ``error.type``.

Spans are captured in memory here; tests/otel/test_phoenix.py reads them back
from a real Phoenix.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pacore_graph import PaCoReConfig, PaCoReResult, SamplingParams, build_pacore_graph
from pacore_graph import ainvoke_pacore as invoke
from pacore_graph.errors import (
    InvalidPromptError,
    ModelCallError,
    UpstreamStatusError,
    UpstreamStreamError,
    UpstreamTimeoutError,
    UpstreamTransportError,
)
from pacore_graph.otel import openinference as oi
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.conventions import UNKNOWN_ERROR_TYPE, error_type

Run = Callable[..., Awaitable[tuple[list[ReadableSpan], PaCoReResult]]]


def reply(call: FakeCall) -> FakeReply:
    return FakeReply(content=f"msg {call.seed}", reasoning="r", completion_tokens=3)


@pytest.fixture
def run(traced: tuple[TracerProvider, InMemorySpanExporter]) -> Run:
    """A traced ``[4, 2]`` run (one request per explorer, seeded); its spans and result."""
    provider, exporter = traced

    async def go(
        question: Any = "What is 17 + 25?",
        *,
        capture: bool = False,
        respond: Callable[[FakeCall], FakeReply] = reply,
    ) -> tuple[list[ReadableSpan], PaCoReResult]:
        graph = build_pacore_graph(
            FakeChatClient(reply=respond, model="m"),
            config=PaCoReConfig(
                rounds=[4, 2], batch_samples=False, sampling=SamplingParams(seed=0)
            ),
            tracing=TraceOptions(tracer_provider=provider, capture_content=capture),
        )
        result = await invoke(graph, question)
        return list(exporter.get_finished_spans()), result

    return go


def kinds(spans: list[ReadableSpan]) -> dict[str, set[tuple[Any, Any, Any]]]:
    """Span name's first word -> {(gen_ai.operation.name, gen_ai.workflow.name, OI kind)}."""
    out: dict[str, set[tuple[Any, Any, Any]]] = {}
    for s in spans:
        a = s.attributes or {}
        out.setdefault(s.name.split(" ")[0], set()).add(
            (a.get("gen_ai.operation.name"), a.get("gen_ai.workflow.name"), a.get(oi.SPAN_KIND))
        )
    return out


async def test_every_span_names_its_genai_operation_and_openinference_kind(run: Run) -> None:
    """The mapping table of docs/tracing.md, span by span.

    The run and its rounds are GenAI workflows (a round groups its K explorer
    calls) and name an OpenInference kind of their own, since Phoenix shows
    ``invoke_workflow`` as unknown; a compaction has no GenAI operation.
    """
    spans, _ = await run()
    assert kinds(spans) == {
        "invoke_workflow": {("invoke_workflow", "pacore", "AGENT")},
        "pacore.round": {("invoke_workflow", "pacore.round", "CHAIN")},
        "pacore.compact": {(None, None, "CHAIN")},
        "chat": {("chat", None, "LLM")},
    }
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "invoke_workflow pacore"
    rounds = [s for s in spans if s.name.startswith("pacore.round")]
    assert sorted(s.name for s in rounds) == ["pacore.round 0", "pacore.round 1", "pacore.round 2"]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in rounds)


async def test_the_root_carries_question_and_answer_only_with_content(run: Run) -> None:
    spans, result = await run(capture=True)
    (root,) = [s for s in spans if s.parent is None]
    attrs = root.attributes or {}
    assert attrs[oi.INPUT_VALUE] == "What is 17 + 25?"
    assert attrs[oi.OUTPUT_VALUE] == result.answer
    assert attrs[oi.INPUT_MIME_TYPE] == attrs[oi.OUTPUT_MIME_TYPE] == "text/plain"


async def test_without_content_the_root_has_sizes_and_chats_no_synthetic_output(
    run: Run,
) -> None:
    spans, result = await run(capture=False)
    (root,) = [s for s in spans if s.parent is None]
    attrs = root.attributes or {}
    assert oi.INPUT_VALUE not in attrs and oi.OUTPUT_VALUE not in attrs
    assert attrs["pacore.input.chars"] == len("What is 17 + 25?")
    assert attrs["pacore.input.messages"] == 1
    assert attrs["pacore.answer.length"] == len(result.answer)
    chats = [s for s in spans if s.name.startswith("chat")]
    # Set, so Phoenix does not fill in {"model": ...} from gen_ai.response.model.
    assert {(s.attributes or {})[oi.OUTPUT_VALUE] for s in chats} == {oi.NOT_CAPTURED}
    assert not any("msg" in str(v) for s in spans for v in (s.attributes or {}).values())


async def test_a_conversation_is_the_roots_input_as_json(run: Run) -> None:
    convo = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    spans, _ = await run(convo, capture=True)
    (root,) = [s for s in spans if s.parent is None]
    attrs = root.attributes or {}
    assert attrs[oi.INPUT_MIME_TYPE] == "application/json"
    assert json.loads(str(attrs[oi.INPUT_VALUE])) == convo


async def test_explorer_spans_record_the_references_they_read(run: Run) -> None:
    spans, result = await run()
    chats = [s for s in spans if s.name.startswith("chat")]
    by_round: dict[int, dict[int, ReadableSpan]] = {}
    for s in chats:
        a = s.attributes or {}
        by_round.setdefault(int(a["pacore.round.index"]), {})[int(a["pacore.explorer.index"])] = s
    assert sorted(len(v) for v in by_round.values()) == [1, 2, 4]
    assert not any("pacore.references" in (s.attributes or {}) for s in by_round[0].values())
    for r in (1, 2):
        for i, span in by_round[r].items():
            refs = json.loads(str((span.attributes or {})["pacore.references"]))
            trajectory = result.rounds[r][i]
            assert [x["index"] for x in refs] == list(trajectory.references)
            assert [x["position"] for x in refs] == list(range(1, len(refs) + 1))
            assert {x["round"] for x in refs} == {r - 1}
            # Each span id is the span of the trajectory that wrote that message,
            # as the links say too.
            assert [x["span_id"] for x in refs] == [
                format(by_round[r - 1][x["index"]].context.span_id, "016x") for x in refs
            ]
            assert [link.context.span_id for link in span.links] == [
                int(x["span_id"], 16) for x in refs
            ]


async def test_error_type_is_the_status_not_the_text(run: Run) -> None:
    def flaky(call: FakeCall) -> FakeReply:
        if call.seed == 1:
            return FakeReply(content="", error="HTTP 500 from http://10.0.0.1:8000/v1: boom")
        if call.seed == 2:
            return FakeReply(content="", error="HTTP 429 from http://10.0.0.1:8000/v1: slow")
        return reply(call)

    spans, _ = await run(respond=flaky)
    failed = {
        (s.attributes or {})["pacore.explorer.index"]: (s.attributes or {})["error.type"]
        for s in spans
        if "error.type" in (s.attributes or {})
    }
    assert failed == {1: "500", 2: "429"}


def _response(status: int) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "http://x/v1/chat/completions"))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("HTTP 500 from http://127.0.0.1:9/v1/chat/completions: {}", "500"),
        ("HTTP 404 from https://api.example.com/v1: not found", "404"),
        ("ValueError: bad thing: with colons", "ValueError"),
        ("http://127.0.0.1:9: refused", UNKNOWN_ERROR_TYPE),
        ("timed out after 3s waiting for http://127.0.0.1:9/v1", UNKNOWN_ERROR_TYPE),
        ("", UNKNOWN_ERROR_TYPE),
        (None, UNKNOWN_ERROR_TYPE),
        (UpstreamStatusError("HTTP 503 from http://x: y", status=503), "503"),
        (UpstreamTimeoutError("timed out after 3s"), "timeout"),
        (UpstreamTransportError("cannot reach http://x: refused"), "transport"),
        (UpstreamStreamError("server reported an error mid-stream: oom"), "stream_error"),
        (InvalidPromptError("the prompt is not valid UTF-8 text"), "invalid_prompt"),
        (ModelCallError("a custom client's failure"), "ModelCallError"),
        (KeyError("k"), "KeyError"),
        # The openai SDK's errors (what LangChain's ChatOpenAI raises) carry their status.
        (openai.InternalServerError("boom", response=_response(500), body=None), "500"),
        (openai.RateLimitError("slow", response=_response(429), body=None), "429"),
        (openai.APITimeoutError(request=httpx.Request("POST", "http://x/v1")), "APITimeoutError"),
    ],
)
def test_error_type_values_are_few(error: Any, expected: str) -> None:
    assert error_type(error) == expected


async def test_a_timed_out_call_is_named_by_its_kind_not_other(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The explorer hands its exception to the span: a timeout's text names no status."""
    provider, exporter = traced

    class TimesOut(FakeChatClient):
        async def complete(self, messages: Any, **kwargs: Any) -> Any:
            if kwargs.get("seed") == 1:
                raise UpstreamTimeoutError("timed out after 3s waiting for http://10.0.0.1/v1")
            return await super().complete(messages, **kwargs)

    graph = build_pacore_graph(
        TimesOut(reply=reply, model="m"),
        config=PaCoReConfig(rounds=[3], batch_samples=False, sampling=SamplingParams(seed=0)),
        tracing=TraceOptions(tracer_provider=provider),
    )
    result = await invoke(graph, "What is 17 + 25?")
    assert [t.failed for t in result.rounds[0]] == [False, True, False]
    types = {
        (s.attributes or {}).get("pacore.explorer.index"): (s.attributes or {}).get("error.type")
        for s in exporter.get_finished_spans()
        if "error.type" in (s.attributes or {})
    }
    assert types == {1: "timeout"}
    assert error_type(result.rounds[0][1].error) == UNKNOWN_ERROR_TYPE  # what the text alone gives
