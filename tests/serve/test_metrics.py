"""serve/metrics on its own: what each recording call adds to the exposition ``/metrics`` serves.

The exposition is parsed back with prometheus_client's own parser, so a test
reads the numbers a scraper would read. The HTTP side (``GET /metrics`` over
real requests, the queue's gauges under load) is tests/serve/test_queue.py's.
"""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from pacore_graph.errors import (
    ERROR_KINDS,
    NoContentError,
    RoundFailedError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from pacore_graph.graph.records import PaCoReResult, Trajectory
from pacore_graph.serve.metrics import OUTCOMES, ReplicaCounts, ServeMetrics, error_kind
from pacore_graph.serve.queue import RunQueue


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


def test_error_kind_of_a_subclass_name_is_its_default_kind() -> None:
    assert error_kind(f"{UpstreamTimeoutError.__name__}: read timed out") == "timeout"
    assert error_kind("  HTTP 429 from http://u") == "status"
    assert error_kind("") == "other"
