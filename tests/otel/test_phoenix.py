"""``pacore run --trace otlp`` into a real Arize Phoenix, read back through its API.

Phoenix converts ``gen_ai.*`` attributes to OpenInference at ingest and shows
what it understood: span kinds, a trace list of the root spans' input and
output, token counts, errors. These tests run a ``--rounds 4,2`` run (one
round-0 call failing with a 500) against the scripted server, export it over
OTLP/HTTP to ``phoenix serve`` and check what Phoenix stored, the way a user
debugging a run would see it. The last one opens the trace in headless
Chromium and keeps a screenshot (its path is printed; CI keeps
``PACORE_ARTIFACTS_DIR``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_support import open_browser
from phoenix_support import Phoenix

from pacore_graph.otel import openinference as oi
from pacore_graph.testing import ScriptedRequest, ScriptedServer

QUESTION = "What is 17 + 25?"
#: Per run: 1 root + 3 rounds + 3 compactions + 4 + 2 + 1 chats.
SPANS_PER_RUN = 1 + 3 + 3 + 7


def fail_one(request: ScriptedRequest) -> int | None:
    """Round 0's explorer 2 (seed 2 under --seed 0) answers 500; every other call succeeds."""
    return 500 if request.seed == 2 and "Reference" not in request.last_user else None


@dataclass(frozen=True)
class TracedRun:
    project: str
    result: dict[str, Any]
    question: str
    spans: list[dict[str, Any]]
    """This run's spans as Phoenix stored them (one trace)."""

    @property
    def root(self) -> dict[str, Any]:
        (root,) = [s for s in self.spans if s["parent_id"] is None]
        return root

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


def pacore_run(phoenix: Phoenix, base_url: str, project: str, question: str, *extra: str) -> Any:
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
        "PACORE_API_KEY": "sk-never-exported",
    }
    env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            "run",
            question,
            "--rounds",
            "4,2",
            "--base-url",
            base_url,
            "--model",
            "scripted",
            "--seed",
            "0",
            "--no-batch",
            "--retries",
            "1",
            "--json",
            "--no-progress",
            "--trace",
            "otlp",
            "--trace-project",
            project,
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def runs(phoenix: Phoenix) -> Iterator[dict[str, TracedRun]]:
    """Two runs in one project: with content capture and without."""
    project = "pacore-issue23"
    questions = {"content": f"{QUESTION} (captured)", "sizes": f"{QUESTION} (sizes only)"}
    results: dict[str, Any] = {}
    with ScriptedServer(model="scripted", fail_when=fail_one).run_in_thread() as server:
        results["content"] = pacore_run(
            phoenix, server.base_url, project, questions["content"], "--trace-content"
        )
        results["sizes"] = pacore_run(phoenix, server.base_url, project, questions["sizes"])
    spans = phoenix.wait_for_spans(project, 2 * SPANS_PER_RUN)
    assert len(spans) == 2 * SPANS_PER_RUN, Counter(s["name"] for s in spans)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_trace.setdefault(s["context"]["trace_id"], []).append(s)
    out: dict[str, TracedRun] = {}
    for key, result in results.items():
        run_id = result["extra"]["run_id"]
        (trace,) = [
            t for t in by_trace.values() if {s["attributes"]["session.id"] for s in t} == {run_id}
        ]
        out[key] = TracedRun(project, result, questions[key], trace)
    yield out


def test_spans_land_in_the_named_project(phoenix: Phoenix, runs: dict[str, TracedRun]) -> None:
    assert phoenix.project_id("pacore-issue23") is not None
    assert phoenix.spans("default") == []  # not Phoenix's default project


def test_span_kinds_are_what_phoenix_recognises(runs: dict[str, TracedRun]) -> None:
    """The kinds named beside ``invoke_workflow`` win: no span of a run is ``unknown``."""
    for run in runs.values():
        kinds = Counter(
            (
                s["name"].split(" ")[0],
                s["attributes"].get("gen_ai.operation.name"),
                s["span_kind"],
            )
            for s in run.spans
        )
        assert kinds == {
            ("invoke_workflow", "invoke_workflow", "AGENT"): 1,
            ("pacore.round", "invoke_workflow", "CHAIN"): 3,
            ("pacore.compact", None, "CHAIN"): 3,
            ("chat", "chat", "LLM"): 7,
        }


def test_the_root_shows_question_and_answer_only_with_content(
    phoenix: Phoenix, runs: dict[str, TracedRun]
) -> None:
    captured, sizes = runs["content"], runs["sizes"]
    attrs = captured.root["attributes"]
    assert attrs["input.value"] == captured.question
    assert attrs["output.value"] == captured.result["answer"]
    plain = sizes.root["attributes"]
    assert "input.value" not in plain and "output.value" not in plain
    assert plain["pacore.input.chars"] == len(sizes.question)
    assert plain["pacore.answer.length"] == len(sizes.result["answer"])
    # The trace list (root spans, through GraphQL as the UI reads it).
    project_id = phoenix.project_id("pacore-issue23")
    data = phoenix.graphql(
        """query($id: ID!) { node(id: $id) { ... on Project {
             spans(first: 10, filterCondition: "parent_id is None") { edges { node {
               context { traceId } spanKind input { value } output { value }
               cumulativeTokenCountCompletion } } } } } }""",
        id=project_id,
    )
    rows = {e["node"]["context"]["traceId"]: e["node"] for e in data["node"]["spans"]["edges"]}
    row = rows[captured.root["context"]["trace_id"]]
    assert row["spanKind"] == "agent"
    assert (row["input"]["value"], row["output"]["value"]) == (
        captured.question,
        captured.result["answer"],
    )
    assert rows[sizes.root["context"]["trace_id"]]["input"] is None
    # Token counts add up to the run's effective TTC, counted once (not again on the root).
    for run in runs.values():
        row = rows[run.root["context"]["trace_id"]]
        assert row["cumulativeTokenCountCompletion"] == run.result["effective_ttc"]


def test_chat_spans_carry_tokens_and_no_synthetic_output(runs: dict[str, TracedRun]) -> None:
    for key, run in runs.items():
        chats = run.named("chat")
        done = [s for s in chats if s["status_code"] != "ERROR"]
        assert (
            sum(s["attributes"]["llm.token_count.completion"] for s in chats)
            == (run.result["effective_ttc"])
        )
        assert all(s["attributes"]["llm.token_count.prompt"] > 0 for s in done)
        outputs = {s["attributes"].get("output.value") for s in done}
        if key == "content":
            answers = {t["content"] for rnd in run.result["rounds"] for t in rnd if not t["failed"]}
            assert outputs == answers
        else:
            # Not {"model": "scripted"}, which Phoenix makes from gen_ai.response.model.
            assert outputs == {oi.NOT_CAPTURED}
            assert not any("llm.output_messages" in k for s in chats for k in s["attributes"])


def test_a_failed_call_has_a_low_cardinality_error_type(runs: dict[str, TracedRun]) -> None:
    for run in runs.values():
        failed = [s for s in run.named("chat") if s["status_code"] == "ERROR"]
        assert len(failed) == 1
        assert failed[0]["attributes"]["error.type"] == "500"  # not "HTTP 500 from http"
        assert "HTTP 500" in failed[0]["status_message"]  # the detail stays in the status


def test_explorer_spans_show_the_references_they_read(runs: dict[str, TracedRun]) -> None:
    """Phoenix stores no links: ``pacore.references`` is how its users see message passing."""
    for run in runs.values():
        rounds = {
            s["context"]["span_id"]: s["attributes"]["pacore.round.index"]
            for s in run.named("pacore.round")
        }
        chats = {s["context"]["span_id"]: s for s in run.named("chat")}
        records = run.result["rounds"]
        checked = 0
        for span_id, span in chats.items():
            attrs = span["attributes"]
            r, i = attrs["pacore.round.index"], attrs["pacore.explorer.index"]
            assert rounds[span["parent_id"]] == r
            if r == 0:
                assert "pacore.references" not in attrs
                continue
            refs = attrs["pacore.references"]
            refs = json.loads(refs) if isinstance(refs, str) else refs
            assert [x["index"] for x in refs] == records[r][i]["references"]
            for ref in refs:
                source = chats[ref["span_id"]]["attributes"]  # a span of this trace
                assert (ref["round"], ref["index"]) == (
                    source["pacore.round.index"],
                    source["pacore.explorer.index"],
                ) and ref["round"] == r - 1
                checked += 1
            assert span_id not in {x["span_id"] for x in refs}
        # Round 1: two explorers read round 0's three messages; round 2 reads both of round 1.
        assert checked == 2 * 3 + 2


def test_the_trace_in_phoenixs_ui(
    phoenix: Phoenix, runs: dict[str, TracedRun], tmp_path: Path
) -> None:
    """The trace page in headless Chromium: the tree renders, and a screenshot is kept."""
    trace_id = runs["content"].root["context"]["trace_id"]

    async def shoot() -> tuple[bytes, str]:
        async with open_browser() as browser, browser.page() as page:
            await page.goto(f"{phoenix.url}/redirects/traces/{trace_id}", width=1400, height=900)
            await page.wait_for(
                "document.body.innerText.includes('pacore.round 2')"
                " && document.body.innerText.includes('pacore.compact conclusion')"
                f" && document.body.innerText.includes({json.dumps(runs['content'].question)})",
                timeout=60,
            )
            await asyncio.sleep(1.0)  # let the panel finish its layout
            text = str(await page.evaluate("document.body.innerText"))
            return await page.screenshot(), text

    png, text = asyncio.run(shoot())
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert "invoke_workflow pacore" in text and runs["content"].result["answer"] in text
    path = tmp_path / "phoenix-trace.png"
    path.write_bytes(png)
    artifacts = os.environ.get("PACORE_ARTIFACTS_DIR")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(artifacts) / path.name)
    print(f"Phoenix trace screenshot: {path}")
