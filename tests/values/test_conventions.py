"""Chat spans follow the GenAI conventions: where the call went, who served it, what answered.

The model server here is a real HTTP server on loopback that answers as a
served model would, with a model name of its own (a dated snapshot, not the
alias the client asked for), so ``gen_ai.response.model`` can only be right
if it was read from the response.
"""

from __future__ import annotations

import ast
import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pacore_graph
from pacore_graph import (
    OpenAICompatClient,
    PaCoReConfig,
    RoundFailedError,
    ainvoke_pacore,
    build_pacore_graph,
)
from pacore_graph.otel import spans
from pacore_graph.otel.exporters import TracingConfigError, exporter_kinds
from pacore_graph.otel.spans import INSTRUMENTATION_NAME, TraceOptions
from pacore_graph.values import conventions
from pacore_graph.values.conventions import (
    OPENAI_COMPATIBLE,
    SCHEMA_URL,
    provider_name,
    server_address_and_port,
)

SNAPSHOT = "served-model-2026-01-01"


@pytest.fixture
async def snapshot_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible endpoint answering as ``SNAPSHOT``; yields (base URL, request log)."""
    seen: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        n = int(body.get("n") or 1)
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": f"answer {i} \\boxed{{{i}}}"},
                "finish_reason": "stop",
            }
            for i in range(n)
        ]
        usage = {"prompt_tokens": 7, "completion_tokens": 5 * n, "total_tokens": 7 + 5 * n}
        return web.json_response(
            {
                "id": "c1",
                "object": "chat.completion",
                "model": SNAPSHOT,
                "choices": choices,
                "usage": usage,
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        await runner.cleanup()


def chats(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://my-res.openai.azure.com/openai/deployments/x", "azure.ai.openai"),
        ("https://api.deepseek.com", "deepseek"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://generativelanguage.googleapis.com/v1beta/openai/", "gcp.gemini"),
        ("http://127.0.0.1:8080/v1", OPENAI_COMPATIBLE),  # llama.cpp's default port
        ("http://localhost:8000/v1", OPENAI_COMPATIBLE),  # vLLM's default port
        ("http://gpu-box.internal/v1", OPENAI_COMPATIBLE),
        ("https://evil-api.openai.com.example.org/v1", OPENAI_COMPATIBLE),  # not a subdomain
        (None, OPENAI_COMPATIBLE),
    ],
)
def test_provider_name_by_host(url: str | None, expected: str) -> None:
    assert provider_name(url) == expected


def test_a_declared_provider_wins() -> None:
    assert provider_name("http://127.0.0.1:8000/v1", declared="vllm") == "vllm"
    assert provider_name("https://api.openai.com/v1", declared="my-proxy") == "my-proxy"


def test_server_address_and_port() -> None:
    assert server_address_and_port("http://127.0.0.1:8080/v1") == ("127.0.0.1", 8080)
    assert server_address_and_port("https://api.openai.com/v1") == ("api.openai.com", 443)
    assert server_address_and_port("http://[::1]:9000/v1") == ("::1", 9000)
    assert server_address_and_port("http://host:notaport/v1") is None
    assert server_address_and_port(None) is None


def test_exporter_kinds_follow_otel_traces_exporter() -> None:
    env = "OTEL_TRACES_EXPORTER"
    assert exporter_kinds(None, {}) == ()
    assert exporter_kinds(None, {env: "none"}) == ()
    assert exporter_kinds(None, {env: "console"}) == ("console",)
    assert exporter_kinds(None, {env: " OTLP , console,otlp"}) == ("otlp", "console")
    assert exporter_kinds(None, {env: "console,none"}) == ()
    assert exporter_kinds("jaeger", {env: "console"}) == ("jaeger",)  # the flag wins
    with pytest.raises(TracingConfigError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        exporter_kinds(None, {env: "zipkin"})


def test_span_attribute_names_come_from_the_conventions_package() -> None:
    """No ``gen_ai.*``/``server.*``/``error.*`` string literal in the span code."""
    spans_py = Path(spans.__file__)
    literals = [
        node.value
        for node in ast.walk(ast.parse(spans_py.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    named = [v for v in literals if v.startswith(("gen_ai.", "server.", "error."))]
    assert named == []
    assert conventions.GEN_AI_PROVIDER_NAME == "gen_ai.provider.name"  # the package's value


# --------------------------------------------------------------------------- spans


async def test_chat_spans_over_real_http_name_server_provider_seed_and_response_model(
    traced: tuple[TracerProvider, InMemorySpanExporter],
    snapshot_server: tuple[str, list[dict[str, Any]]],
) -> None:
    provider, exporter = traced
    base_url, seen = snapshot_server
    client = OpenAICompatClient(base_url, "alias-model")
    graph = build_pacore_graph(
        client,
        config=PaCoReConfig(
            rounds=[2], batch_samples=True, sampling={"seed": 40, "max_tokens": 32}
        ),
        tracing=TraceOptions(tracer_provider=provider),
    )
    try:
        await ainvoke_pacore(graph, "Q?")
    finally:
        await client.aclose()
    spans = chats(exporter)
    assert len(spans) == 2 + 1
    port = int(base_url.split(":")[2].split("/")[0])
    for span in spans:
        attrs = span.attributes or {}
        assert attrs["server.address"] == "127.0.0.1"
        assert attrs["server.port"] == port
        assert attrs["gen_ai.provider.name"] == OPENAI_COMPATIBLE  # a local server is not OpenAI
        assert attrs["gen_ai.request.model"] == "alias-model"
        assert attrs["gen_ai.response.model"] == SNAPSHOT
    # Samples' seeds come from pacore_graph.values.seeds: explorer i of round r draws
    # with 40 + 1000 * r + i. Round 0 is usually one batched request (n=2)
    # carrying the seed of its first sample; a loaded machine may split it into
    # two requests. Either way the samples' seeds are the same.
    sample_seeds = sorted(body["seed"] + j for body in seen for j in range(int(body.get("n") or 1)))
    assert sample_seeds == [40, 41, 1040]
    # Each chat span records the seed its request was sent with.
    sent = sorted(body["seed"] for body in seen for _ in range(int(body.get("n") or 1)))
    assert sorted(int((s.attributes or {})["gen_ai.request.seed"]) for s in spans) == sent
    assert {s.instrumentation_scope.name for s in exporter.get_finished_spans()} == {
        INSTRUMENTATION_NAME
    }
    scope = spans[0].instrumentation_scope
    assert scope.version == pacore_graph.__version__
    assert scope.schema_url == SCHEMA_URL


async def test_a_declared_provider_and_a_failed_call_still_name_the_server(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAICompatClient(f"http://127.0.0.1:{port}/v1", "m")
    graph = build_pacore_graph(
        client,
        config=PaCoReConfig(rounds=[1], retry={"max_attempts": 1}),
        tracing=TraceOptions(tracer_provider=provider, provider_name="vllm"),
    )
    try:
        with pytest.raises(RoundFailedError):  # the only explorer failed
            await asyncio.wait_for(ainvoke_pacore(graph, "Q?"), 60)
    finally:
        await client.aclose()
    spans = chats(exporter)
    assert spans
    attrs = spans[0].attributes or {}
    assert attrs["gen_ai.provider.name"] == "vllm"
    assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", port)
    assert "gen_ai.response.model" not in attrs  # nothing answered
    assert "error.type" in attrs


async def test_a_replica_set_names_its_provider_but_no_single_server(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Two replicas of one model: which one answered a call is not the span's to guess."""
    from pacore_graph.llm.multi_client import MultiEndpointClient
    from pacore_graph.testing import ScriptedServer

    provider, exporter = traced
    async with ScriptedServer(model="m") as one, ScriptedServer(model="m") as two:
        client = MultiEndpointClient([one.base_url, two.base_url], "m")
        graph = build_pacore_graph(
            client,
            config=PaCoReConfig(rounds=[2], sampling={"seed": 3}),
            tracing=TraceOptions(tracer_provider=provider),
        )
        try:
            await ainvoke_pacore(graph, "Q?")
        finally:
            await client.aclose()
    spans = chats(exporter)
    assert len(spans) == 3
    for span in spans:
        attrs = span.attributes or {}
        assert attrs["gen_ai.provider.name"] == OPENAI_COMPATIBLE
        assert "server.address" not in attrs and "server.port" not in attrs
        assert attrs["gen_ai.response.model"] == "m"
        assert "gen_ai.request.seed" in attrs
