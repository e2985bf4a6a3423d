"""The examples run as a user would run them, against a local scripted server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from otlp_receiver import Receiver

from pacore_graph.testing import ScriptedServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_compose_into_larger_graph() -> None:
    with ScriptedServer(model="m").run_in_thread() as srv:
        proc = run_example(
            "compose_into_larger_graph.py",
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "What is seventeen plus twenty five?",
        )
        requests = len(srv.requests)
    assert proc.returncode == 0, proc.stderr
    assert "answered by the hard path" in proc.stdout
    assert "conversation: ['human', 'ai']" in proc.stdout
    assert requests == 2  # one n=4 request, then the final round


def test_trace_to_jaeger_sends_spans(receiver: Receiver) -> None:
    with ScriptedServer(model="m").run_in_thread() as srv:
        proc = run_example(
            "trace_to_jaeger.py",
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "--endpoint",
            f"{receiver.url}/v1/traces",
        )
    assert proc.returncode == 0, proc.stderr
    names = [s["name"] for s in receiver.spans()]
    assert names.count("chat m") == 4 + 2 + 1
    assert "invoke_workflow pacore" in names


def test_custom_explorer_draft_then_check() -> None:
    with ScriptedServer(model="m").run_in_thread() as srv:
        proc = run_example("custom_explorer.py", "--base-url", srv.base_url, "--model", "m")
        requests = list(srv.requests)
    assert proc.returncode == 0, proc.stderr
    # The xray drawing shows the explorer subgraph's two nodes inside explore.
    assert "draft(draft)" in proc.stdout and "check(check)" in proc.stdout
    assert "explorer steps streamed: 4 draft, 4 check" in proc.stdout  # 3 + final 1
    assert "rounds: [3, 1]" in proc.stdout
    # Two calls per explorer; the second carries the draft to check.
    assert len(requests) == 2 * (3 + 1)
    checks = [r for r in requests if "Here is a draft answer" in r.body["messages"][-1]["content"]]
    assert len(checks) == 4
    assert all(r.body["max_tokens"] == 128 for r in requests)
