"""``pacore serve --trace``: a served run's spans reach the OTLP endpoint, filed under its project.

A real ``pacore serve`` process over the scripted model server, called with
the ``openai`` SDK; spans land in the local OTLP receiver and are flushed
when the server stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import openai
from otlp_receiver import Receiver
from serve_support import free_port

from pacore_graph.otel import openinference as oi
from pacore_graph.testing import ScriptedServer


def test_pacore_serve_traces_each_run_under_its_project(receiver: Receiver) -> None:
    with ScriptedServer().run_in_thread() as upstream:
        port = free_port()
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces",
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pacore_graph.cli",
                "serve",
                "--upstream",
                upstream.base_url,
                "--model",
                "scripted",
                "--port",
                str(port),
                "--trace",
                "otlp",
                "--trace-project",
                "served-runs",
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "pacore serve did not start"
                time.sleep(0.2)
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
            reply = client.chat.completions.create(
                model="pacore:2", messages=[{"role": "user", "content": "What is 2 + 3?"}]
            )
            proc.send_signal(signal.SIGTERM)  # the exporter is flushed as the server stops
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code in (0, -signal.SIGTERM)
    assert reply.choices[0].message.content
    spans = receiver.spans()
    assert spans, "no span reached the OTLP endpoint"
    assert {s["project"] for s in spans} == {"served-runs"}
    kinds = [s["attributes"].get(oi.SPAN_KIND) for s in spans]
    assert kinds.count("AGENT") == 1  # the run's root
    widths = [r["width"] for r in (reply.usage.model_extra or {})["rounds"]] if reply.usage else []
    assert widths == [2, 1]
    assert kinds.count("LLM") == sum(widths)  # one chat span per trajectory
