"""``pacore serve --trace``: a served run's spans reach the OTLP endpoint, filed under its project.

A real ``pacore serve`` process over the scripted model server, called with
the ``openai`` SDK; spans land in the local OTLP receiver and are flushed
when the server stops.
"""

from __future__ import annotations

import signal

import openai
from otlp_receiver import Receiver
from serve_support import serve_process

from pacore_graph.otel import openinference as oi
from pacore_graph.testing import ScriptedServer


def test_pacore_serve_traces_each_run_under_its_project(receiver: Receiver) -> None:
    with (
        ScriptedServer().run_in_thread() as upstream,
        serve_process(
            "--upstream",
            upstream.base_url,
            "--model",
            "scripted",
            "--trace",
            "otlp",
            "--trace-project",
            "served-runs",
            "--log-level",
            "warning",
            env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces"},
        ) as server,
    ):
        base = server.base
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="pacore:2", messages=[{"role": "user", "content": "What is 2 + 3?"}]
        )
        code = server.stop()  # the exporter is flushed as the server stops
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
