"""serve/metrics on its own: what each recording call adds to the exposition ``/metrics`` serves.

The exposition is parsed back with prometheus_client's own parser, so a test
reads the numbers a scraper would read. The HTTP side (``GET /metrics`` over
real requests, the queue's gauges under load) is tests/serve/test_queue.py's,
except the check that docs/serve.md's table and a real ``/metrics`` name the
same metrics.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families
from serve_support import running_serve, serve_settings

from pacore_graph.errors import (
    ERROR_KINDS,
    NoContentError,
    RoundFailedError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from pacore_graph.serve.metrics import OUTCOMES, ReplicaCounts, ServeMetrics, error_kind
from pacore_graph.serve.queue import RunQueue
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedServer
from pacore_graph.values.records import PaCoReResult, Trajectory

SERVE_DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"
_TABLE_HEADER = "| metric | type | labels | what |"


def samples(metrics: ServeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, as a scraper reads them."""
    text = metrics.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: ServeMetrics, name: str, **labels: str) -> float:
    return samples(metrics)[(name, tuple(sorted(labels.items())))]


def result(*trajectories: Trajectory) -> PaCoReResult:
    return PaCoReResult(
        answer="a", reasoning=None, rounds=(tuple(trajectories),), schedule=(len(trajectories),)
    )


def test_every_outcome_and_error_kind_is_exposed_at_zero_before_anything_happens() -> None:
    metrics = ServeMetrics(RunQueue(2, 4, None))
    for outcome in OUTCOMES:
        assert value(metrics, "pacore_runs_total", outcome=outcome) == 0
    for kind in ERROR_KINDS:
        assert value(metrics, "pacore_upstream_errors_total", kind=kind) == 0
    assert value(metrics, "pacore_runs_running") == 0
    assert value(metrics, "pacore_runs_queued") == 0


def test_finished_counts_the_outcome_and_observes_only_given_durations() -> None:
    metrics = ServeMetrics(RunQueue(1, 0, None))
    metrics.finished("ok", 2.0)
    metrics.finished("ok", 0.5)
    metrics.finished("cancelled")
    assert value(metrics, "pacore_runs_total", outcome="ok") == 2
    assert value(metrics, "pacore_runs_total", outcome="cancelled") == 1
    assert value(metrics, "pacore_runs_total", outcome="failed") == 0
    assert value(metrics, "pacore_run_duration_seconds_count") == 2
    assert value(metrics, "pacore_run_duration_seconds_sum") == 2.5
    assert value(metrics, "pacore_run_duration_seconds_bucket", le="1.0") == 1


def test_a_result_counts_its_failed_calls_by_kind_and_its_answers_on_replica_zero() -> None:
    metrics = ServeMetrics(RunQueue(1, 0, None))
    metrics.result(
        result(
            Trajectory(round=0, index=0, content="x", message="x", completion_tokens=7),
            Trajectory(round=0, index=1, error="HTTP 503 from http://u/v1: busy"),
            Trajectory(round=0, index=2, error="NoContentError: empty"),
            Trajectory(round=0, index=3, content="y", message="y", completion_tokens=5),
        )
    )
    metrics.result(result(Trajectory(round=0, index=0, content="z", completion_tokens=1)))
    assert value(metrics, "pacore_upstream_errors_total", kind="status") == 1
    assert value(metrics, "pacore_upstream_errors_total", kind="no_content") == 1
    assert value(metrics, "pacore_upstream_errors_total", kind="timeout") == 0
    # Failed calls answered nothing: 3 samples, 7 + 5 + 1 tokens.
    assert value(metrics, "pacore_replica_samples_total", upstream="0") == 3
    assert value(metrics, "pacore_replica_completion_tokens_total", upstream="0") == 13


def test_given_replica_counts_are_read_at_scrape_time_and_results_do_not_add_to_them() -> None:
    counts = [ReplicaCounts(1, 10), ReplicaCounts(0, 0)]
    metrics = ServeMetrics(RunQueue(1, 0, None), replicas=lambda: counts)
    metrics.result(result(Trajectory(round=0, index=0, content="x", completion_tokens=99)))
    assert value(metrics, "pacore_replica_samples_total", upstream="0") == 1
    assert value(metrics, "pacore_replica_samples_total", upstream="1") == 0
    counts[1] = ReplicaCounts(4, 40)
    assert value(metrics, "pacore_replica_completion_tokens_total", upstream="1") == 40
    assert value(metrics, "pacore_replica_completion_tokens_total", upstream="0") == 10


def test_a_failure_counts_a_rounds_errors_or_the_one_calls_kind() -> None:
    metrics = ServeMetrics(RunQueue(1, 0, None))
    metrics.failure(
        RoundFailedError(
            "round 0 failed",
            round_index=0,
            errors=["timed out after 5s reading http://u", "UpstreamTimeoutError: timed out"],
        )
    )
    metrics.failure(UpstreamStatusError("HTTP 500", status=500))
    metrics.failure(NoContentError("empty"))
    metrics.failure(ValueError("not an upstream error"))
    assert value(metrics, "pacore_upstream_errors_total", kind="timeout") == 2
    assert value(metrics, "pacore_upstream_errors_total", kind="status") == 1
    assert value(metrics, "pacore_upstream_errors_total", kind="no_content") == 1
    assert value(metrics, "pacore_upstream_errors_total", kind="other") == 0


def test_the_queue_gauges_are_read_from_the_queue_at_scrape_time() -> None:
    queue = RunQueue(2, 4, None)
    metrics = ServeMetrics(queue)
    for _ in range(2):
        asyncio.run(queue.acquire())
    assert value(metrics, "pacore_runs_running") == 2


def test_two_apps_in_one_process_keep_separate_counts() -> None:
    first, second = ServeMetrics(RunQueue(1, 0, None)), ServeMetrics(RunQueue(1, 0, None))
    first.finished("queue_full")
    assert value(first, "pacore_runs_total", outcome="queue_full") == 1
    assert value(second, "pacore_runs_total", outcome="queue_full") == 0


def test_error_kind_of_a_subclass_name_is_its_kind() -> None:
    assert error_kind(f"{UpstreamTimeoutError.__name__}: read timed out") == "timeout"
    assert error_kind("  HTTP 429 from http://u") == "status"
    assert error_kind("") == "other"


def documented_metrics() -> dict[str, tuple[str, dict[str, set[str]]]]:
    """docs/serve.md's ``/metrics`` table: name -> (type, {label: values it lists}).

    A labels cell names a label and its values (the backticked words after a
    colon: outcome, then ok, failed, ...), or label names alone; words in
    parentheses are remarks (upstream's "index in --upstream order", status's
    "HTTP status, or error"), never labels.
    """
    lines = SERVE_DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(_TABLE_HEADER) + 2  # the header, then the |---| row
    out: dict[str, tuple[str, dict[str, set[str]]]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, kind, labels_cell, _what = (c.strip() for c in line.strip("|").split("|"))
        labels_cell = re.sub(r"\([^)]*\)", "", labels_cell)
        head, colon, tail = labels_cell.partition(":")
        labels: dict[str, set[str]] = {n: set() for n in re.findall(r"`([^`]+)`", head)}
        if colon:
            (label,) = labels
            labels[label] = set(re.findall(r"`([^`]+)`", tail))
        out[name.strip("`")] = (kind, labels)
    return out


def test_the_documented_metrics_are_the_served_ones() -> None:
    """Every metric of docs/serve.md's table is in a real ``/metrics``, and every served one
    is in the table: same name, type, label names and (where the table lists them) values.

    The response comes from a real server after a PaCoRe run and a passed-through
    request, so every labelled family has samples. prometheus_client adds a
    ``<name>_created`` gauge (the series' creation time) beside each counter and
    histogram it keeps itself; those are that metric's companions, not metrics
    of their own, and are accepted only beside a documented metric.
    """
    documented = documented_metrics()
    assert "pacore_runs_total" in documented  # the table was found and read
    with ScriptedServer().run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(serve_settings(upstream, retry=ModelRetryPolicy(max_attempts=1))) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            ask: list[Any] = [{"role": "user", "content": "What is 2+3?"}]
            client.chat.completions.create(model="pacore:2", messages=ask)
            client.chat.completions.create(model="scripted", messages=ask)  # passed through
            resp = httpx.get(f"http://127.0.0.1:{srv.server.config.port}/metrics")
    assert resp.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(resp.text)}

    def family_name(name: str, kind: str) -> str:
        # The parser names a counter's family without its _total suffix.
        return name.removesuffix("_total") if kind == "counter" else name

    expected = {family_name(name, kind): name for name, (kind, _) in documented.items()}
    companions = {
        f"{family}_created"
        for family, name in expected.items()
        if documented[name][0] in ("counter", "histogram")
    }
    served = set(families)
    assert served - companions == set(expected), (
        f"served, not in docs/serve.md: {sorted(served - companions - set(expected))}; "
        f"documented, not served: {sorted(set(expected) - served)}"
    )
    assert all(families[n].type == "gauge" for n in served & companions)
    for family, name in expected.items():
        kind, labels = documented[name]
        f = families[family]
        assert f.type == kind, (name, f.type)
        samples = [s for s in f.samples if not s.name.endswith("_created")]
        assert samples, f"{name} has no samples"
        names = {k for s in samples for k in s.labels if k != "le"}  # le: a histogram's buckets
        assert names == set(labels), (name, names)
        for label, values in labels.items():
            if values:
                assert {s.labels[label] for s in samples} == values, (name, label)
