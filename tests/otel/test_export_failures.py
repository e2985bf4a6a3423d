"""otel/export_failures: a collector that is not there costs one line and no wait at exit.

Real exporters, real sockets: a port nobody listens on (bound, then closed)
stands for "Jaeger is not running", the OTLP receiver of ``otlp_receiver``
for a collector that is.
"""

from __future__ import annotations

import socket
import time

import pytest
from otlp_receiver import Receiver

from pacore_graph.cli import main
from pacore_graph.otel.export_failures import trace_destinations, tracing_session
from pacore_graph.otel.exporters import JAEGER_ENDPOINT, configure_tracing
from pacore_graph.testing import ScriptedServer


def closed_port_url() -> str:
    """An OTLP endpoint on loopback where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/traces"


def make_spans(provider: object, n: int = 3) -> None:
    tracer = provider.get_tracer("test")  # type: ignore[attr-defined]
    for i in range(n):
        with tracer.start_as_current_span(f"span {i}"):
            pass


def test_destinations_name_where_spans_go() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert trace_destinations(["jaeger"], env={}) == [JAEGER_ENDPOINT]
    assert trace_destinations(["otlp"], env=env) == ["http://collector:4318/v1/traces"]
    assert trace_destinations(["otlp"], env={}) == ["http://localhost:4318/v1/traces"]
    traces = {**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"}
    assert trace_destinations(["otlp"], env=traces) == ["http://t:1/x"]
    assert trace_destinations(["console"], env={}) == []
    keys = {"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk", "LANGFUSE_HOST": "https://lf"}
    assert trace_destinations(["langfuse"], env=keys) == ["https://lf/api/public/otel/v1/traces"]
    assert trace_destinations(["jaeger", "otlp"], endpoint="http://e/v1/traces") == [
        "http://e/v1/traces"
    ]


def test_an_unreachable_collector_is_one_line_and_no_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = closed_port_url()
    provider = configure_tracing("otlp", endpoint=url)
    lines: list[str] = []
    with tracing_session(provider, [url], lines.append):
        make_spans(provider)
        closing = time.monotonic()
    waited = time.monotonic() - closing
    # Before: provider.shutdown() sat through the exporter's retries (1 + 2 + 4 s).
    assert waited < 1.5, f"the session waited {waited:.1f}s for an export that cannot succeed"
    assert len(lines) == 1
    assert lines[0].startswith(f"pacore: warning: spans not sent to {url} (connection refused")
    assert lines[0].count("\n") == 1
    # The exporter's own retry and failure logs are gone, not merely preceded by ours.
    time.sleep(1.5)  # a retry the abandoned shutdown still makes would log by now
    assert capsys.readouterr().err == ""


def test_a_live_collector_gets_every_span_and_no_line(receiver: Receiver) -> None:
    url = f"{receiver.url}/v1/traces"
    provider = configure_tracing("otlp", endpoint=url)
    lines: list[str] = []
    with tracing_session(provider, [url], lines.append):
        make_spans(provider, 5)
    assert lines == []
    assert sorted(s["name"] for s in receiver.spans()) == [f"span {i}" for i in range(5)]


def test_pacore_run_with_no_collector_prints_the_answer_and_exits_promptly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pacore run --trace otlp`` (``jaeger`` is the same exporter) with nothing listening."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", closed_port_url())
    with ScriptedServer(model="m").run_in_thread() as srv:
        argv = ["run", "What is 2+2?", "--rounds", "2", "--base-url", srv.base_url, "--model", "m"]

        def timed(*extra: str) -> float:
            start = time.monotonic()
            assert main([*argv, *extra]) == 0
            return time.monotonic() - start

        timed()  # the first run pays for the imports
        capsys.readouterr()
        traced = timed("--trace", "otlp")
        out, err = capsys.readouterr()
        plain = timed()
    assert "The answer is" in out
    warnings = [line for line in err.splitlines() if line.startswith("pacore: warning:")]
    assert len(warnings) == 1 and "connection refused" in warnings[0]
    assert "Transient error" not in err and "Failed to export" not in err
    assert traced - plain < 2.0, (
        f"--trace with no collector took {traced:.1f}s, {plain:.1f}s without"
    )
