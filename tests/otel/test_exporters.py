"""Spans over the wire: a local OTLP/HTTP receiver decodes what the exporter sends.

The receiver is a plain HTTP server on loopback that parses the protobuf
``ExportTraceServiceRequest`` with opentelemetry-proto, the way Jaeger or
Langfuse would, and keeps the request headers (for Langfuse's Basic auth).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from otlp_receiver import Receiver

import pacore_graph
from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.otel.exporters import (
    DEFAULT_TRACE_PROJECT,
    PROJECT_ATTRIBUTE,
    TracingConfigError,
    configure_tracing,
)
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.fake_client import FakeChatClient


async def test_langfuse_export_sends_basic_auth_and_genai_spans(receiver: Receiver) -> None:
    env = {
        "LANGFUSE_HOST": receiver.url,
        "LANGFUSE_PUBLIC_KEY": "pk-lf-123",
        "LANGFUSE_SECRET_KEY": "sk-lf-secret",
    }
    provider = configure_tracing("langfuse", env=env, batch=False)
    graph = build_pacore_graph(
        FakeChatClient(model="pacore-8b"),
        config=PaCoReConfig(rounds=[3, 2]),
        tracing=TraceOptions(tracer_provider=provider),
    )
    result = await ainvoke_pacore(graph, "Q?")
    provider.shutdown()
    assert receiver.requests, "no OTLP request arrived"
    paths = {path for path, _, _ in receiver.requests}
    assert paths == {"/api/public/otel/v1/traces"}
    expected = "Basic " + base64.b64encode(b"pk-lf-123:sk-lf-secret").decode()
    assert all(h["authorization"] == expected for _, h, _ in receiver.requests)
    assert all(h["content-type"] == "application/x-protobuf" for _, h, _ in receiver.requests)
    spans = receiver.spans()
    names = [s["name"] for s in spans]
    assert names.count("invoke_workflow pacore") == 1
    assert names.count("chat pacore-8b") == 3 + 2 + 1
    assert sorted(n for n in names if n.startswith("pacore.round")) == [
        "pacore.round 0",
        "pacore.round 1",
        "pacore.round 2",
    ]
    chats = [s for s in spans if s["name"] == "chat pacore-8b"]
    assert all(s["attributes"]["gen_ai.operation.name"] == "chat" for s in chats)
    assert sum(s["attributes"]["gen_ai.usage.output_tokens"] for s in chats) == (
        result.effective_ttc
    )
    run_id = result.extra["run_id"]
    assert {s["attributes"]["gen_ai.conversation.id"] for s in spans} == {run_id}
    linked = [s for s in chats if s["links"]]
    assert len(linked) == 2 + 1  # every explorer after round 0 read earlier messages
    assert sorted(link["pacore.reference.position"] for link in linked[0]["links"]) in (
        [1, 2, 3],
        [1, 2],
    )
    assert {s["service"] for s in spans} == {"pacore-graph"}
    assert all(b"sk-lf-secret" not in body for _, _, body in receiver.requests)


async def run_traced(provider: Any) -> None:
    """One small traced run whose spans ``provider`` exports, then flushed by its shutdown."""
    graph = build_pacore_graph(
        FakeChatClient(),
        config=PaCoReConfig(rounds=[2]),
        tracing=TraceOptions(tracer_provider=provider),
    )
    await ainvoke_pacore(graph, "Q?")
    provider.shutdown()


async def test_jaeger_and_otlp_kinds_reach_their_endpoints(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = configure_tracing("jaeger", endpoint=f"{receiver.url}/v1/traces", batch=False)
    await run_traced(provider)
    assert {p for p, _, _ in receiver.requests} == {"/v1/traces"}
    receiver.requests.clear()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/custom/traces")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-bot")
    provider = configure_tracing("otlp", batch=False)
    await run_traced(provider)
    assert {p for p, _, _ in receiver.requests} == {"/custom/traces"}
    assert {s["service"] for s in receiver.spans()} == {"my-bot"}


async def test_without_a_project_runs_are_filed_under_pacore(receiver: Receiver) -> None:
    """No ``project``: the resource says ``openinference.project.name=pacore``, over the wire.

    Phoenix files spans by that attribute (not ``service.name``), so a run
    traced without ``--trace-project`` lands in ``pacore``, not in Phoenix's
    ``default``; a named project replaces it.
    """
    provider = configure_tracing("otlp", endpoint=f"{receiver.url}/v1/traces", batch=False)
    assert provider.resource.attributes[PROJECT_ATTRIBUTE] == DEFAULT_TRACE_PROJECT == "pacore"
    await run_traced(provider)
    spans = receiver.spans()
    assert spans and {s["project"] for s in spans} == {"pacore"}
    named = configure_tracing((), project="my-runs")
    assert named.resource.attributes[PROJECT_ATTRIBUTE] == "my-runs"
    named.shutdown()


def test_langfuse_without_keys_is_a_clear_error() -> None:
    with pytest.raises(TracingConfigError, match="LANGFUSE_PUBLIC_KEY"):
        configure_tracing("langfuse", env={})
    with pytest.raises(TracingConfigError, match="unknown trace kind"):
        configure_tracing("zipkin")


def test_cli_trace_otlp_with_content_over_real_http(receiver: Receiver) -> None:
    """``pacore run --trace otlp`` without ``--trace-project``: the ``pacore`` project's spans."""
    with ScriptedServer(model="m").run_in_thread() as model_server:
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces",
            "PACORE_API_KEY": "sk-should-never-be-exported",
        }
        env.pop("PACORE_TRACE_PROJECT", None)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pacore_graph.cli",
                "run",
                "What is 2+2?",
                "--rounds",
                "2",
                "--base-url",
                model_server.base_url,
                "--model",
                "m",
                "--json",
                "--trace",
                "otlp",
                "--trace-content",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # stdout is still exactly one JSON object
    spans = receiver.spans()
    chats = [s for s in spans if s["name"] == "chat m"]
    assert len(chats) == 3
    first = json.loads(chats[0]["attributes"]["gen_ai.input.messages"])
    assert (
        first[0]["parts"][0]["content"] in ("What is 2+2?",)
        or "Reference" in (first[0]["parts"][0]["content"])
    )
    assert all("gen_ai.output.messages" in s["attributes"] for s in chats)
    assert all(b"sk-should-never-be-exported" not in body for _, _, body in receiver.requests)
    assert {s["project"] for s in spans} == {"pacore"}


def _cli_run(base_url: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``pacore run "Q" --rounds 1 --json`` against ``base_url``, plus ``extra`` flags."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            "run",
            "Q",
            "--rounds",
            "1",
            "--base-url",
            base_url,
            "--model",
            "m",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )


def test_cli_trace_console_keeps_stdout_clean() -> None:
    with ScriptedServer(model="m").run_in_thread() as model_server:
        proc = _cli_run(model_server.base_url, {}, "--trace", "console")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"]
    assert '"name": "invoke_workflow pacore"' in proc.stderr
    assert '"name": "chat m"' in proc.stderr


def test_cli_honours_otel_traces_exporter(receiver: Receiver) -> None:
    with ScriptedServer(model="m").run_in_thread() as model_server:
        console = _cli_run(model_server.base_url, {"OTEL_TRACES_EXPORTER": "console"})
        silent = _cli_run(model_server.base_url, {"OTEL_TRACES_EXPORTER": "none"})
        otlp = _cli_run(
            model_server.base_url,
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces",
            },
        )
        wrong = _cli_run(model_server.base_url, {"OTEL_TRACES_EXPORTER": "zipkin"})
        base_url = model_server.base_url
    assert console.returncode == 0, console.stderr
    assert json.loads(console.stdout)["answer"]  # spans go to stderr, stdout stays JSON
    assert '"name": "chat m"' in console.stderr
    assert '"gen_ai.provider.name": "openai_compatible"' in console.stderr
    assert '"server.address": "127.0.0.1"' in console.stderr
    assert silent.returncode == 0 and '"name": "chat m"' not in silent.stderr
    assert otlp.returncode == 0, otlp.stderr
    spans = receiver.spans()
    names = [s["name"] for s in spans]
    assert names.count("chat m") == 2 and names.count("invoke_workflow pacore") == 1
    # What the conventions ask of a chat span arrives over the wire.
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    for chat in (s for s in spans if s["name"] == "chat m"):
        attrs = chat["attributes"]
        assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", port)
        assert attrs["gen_ai.provider.name"] == "openai_compatible"
        assert attrs["gen_ai.response.model"] == "m"
    assert {(s["scope"], s["scope_version"]) for s in spans} == {
        ("pacore_graph", pacore_graph.__version__)
    }
    assert {s["schema_url"] for s in spans} == {"https://opentelemetry.io/schemas/1.40.0"}
    assert {s["service_version"] for s in spans} == {pacore_graph.__version__}
    assert wrong.returncode == 2
    assert "OTEL_TRACES_EXPORTER='zipkin'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
