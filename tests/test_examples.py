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
