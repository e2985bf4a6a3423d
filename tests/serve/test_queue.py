"""``pacore serve`` under load: the FIFO run queue and ``GET /metrics``, over real HTTP.

Order and admission are read from the server's own counters and from the
upstream's request log, never from timing: a test waits until the server
says a request is queued before it sends the next one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serve_support import RunningServe, running_serve, serve_settings

from pacore_graph.serve import ServeSettings
from pacore_graph.serve.metrics import error_kind
from pacore_graph.serve.queue import QueueFullError, QueueTimeoutError, RunQueue
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.scripted_server import ScriptedRequest
from pacore_graph.testing.throughput_server import LengthModel, ThroughputServer

FAST = ModelRetryPolicy(max_attempts=1, initial_backoff=0.001, max_backoff=0.01)


def settings(*upstreams: Any, **overrides: Any) -> ServeSettings:
    return serve_settings(*upstreams, **{"retry": FAST, **overrides})


def body(text: str, model: str = "pacore:1") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for the server to reach a state (a generous bound only against a hang)."""
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def reaches(read: Callable[[], int], value: int, what: str) -> None:
    """Wait for a server counter to reach ``value``."""
    await until(lambda: read() == value, what)


def root(srv: RunningServe) -> str:
    return f"http://127.0.0.1:{srv.server.config.port}"


def scrape(srv: RunningServe) -> dict[str, Any]:
    """``/metrics`` parsed by prometheus_client's own parser: {sample name+labels: value}."""
    resp = httpx.get(f"{root(srv)}/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, Any] = {"__types__": {}}
    for family in text_string_to_metric_families(resp.text):
        samples["__types__"][family.name] = family.type
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}"] = s.value
    return samples


async def post(session: aiohttp.ClientSession, srv: RunningServe, payload: Any) -> Any:
    async with session.post(f"{srv.base_url}/chat/completions", json=payload) as resp:
        return resp.status, dict(resp.headers), await resp.json()


# --------------------------------------------------------------------------- the queue alone


async def test_the_queue_admits_in_arrival_order_and_hands_slots_on() -> None:
    queue = RunQueue(max_running=1, max_queued=8, timeout_s=None)
    assert await queue.acquire() == 0.0
    admitted: list[str] = []

    async def wait(name: str) -> None:
        await queue.acquire()
        admitted.append(name)

    tasks = []
    for count, name in enumerate("abcde", start=1):
        tasks.append(asyncio.ensure_future(wait(name)))
        await reaches(lambda: queue.queued, count, "queued")
    tasks[2].cancel()  # "c" gives up: out of the queue, no slot taken
    await until(lambda: queue.queued == 4, "c left")
    for count in range(1, 5):
        queue.release()
        await reaches(lambda: len(admitted), count, "next admitted")
    assert admitted == ["a", "b", "d", "e"]
    assert (queue.running, queue.abandoned, queue.admitted) == (1, 1, 5)
    queue.release()
    assert queue.running == 0


async def test_the_queue_refuses_when_full_and_after_its_timeout() -> None:
    queue = RunQueue(max_running=1, max_queued=1, timeout_s=0.05)
    await queue.acquire()
    waiting = asyncio.ensure_future(queue.acquire())
    await until(lambda: queue.queued == 1, "queued")
    with pytest.raises(QueueFullError):
        await queue.acquire()
    with pytest.raises(QueueTimeoutError):
        await waiting
    assert (queue.rejected, queue.timed_out, queue.queued, queue.running) == (1, 1, 0, 1)


# --------------------------------------------------------------------------- over HTTP


async def test_requests_over_max_concurrency_run_in_arrival_order() -> None:
    """Five requests queued behind a slow one start in the order they came (upstream log)."""
    with ScriptedServer(latency=0.3).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow, max_concurrency=1)) as srv:
            async with aiohttp.ClientSession() as session:
                tasks = [asyncio.ensure_future(post(session, srv, body("hold")))]
                await until(lambda: srv.state.active == 1, "hold running")
                queue = srv.state.queue
                for count, name in enumerate(["q1", "q2", "q3", "q4", "q5"], start=1):
                    tasks.append(asyncio.ensure_future(post(session, srv, body(name))))
                    await reaches(lambda: queue.queued, count, f"{name} queued")
                answers = await asyncio.gather(*tasks)
    assert [status for status, _, _ in answers] == [200] * 6
    first_calls = [r.body["messages"][-1]["content"] for r in slow.requests]
    order = [name for name in first_calls if name in {"hold", "q1", "q2", "q3", "q4", "q5"}]
    assert order == ["hold", "q1", "q2", "q3", "q4", "q5"]
    assert srv.state.queue.rejected == 0


async def test_a_full_queue_is_429_with_retry_after_and_the_queued_request_still_runs() -> None:
    with ScriptedServer(latency=0.3).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow, max_concurrency=1, max_queue=1, retry_after_s=7)) as srv:
            async with aiohttp.ClientSession() as session:
                hold = asyncio.ensure_future(post(session, srv, body("hold")))
                await until(lambda: srv.state.active == 1, "hold running")
                queued = asyncio.ensure_future(post(session, srv, body("queued")))
                await until(lambda: srv.state.queue.queued == 1, "queued")
                status, headers, error = await post(session, srv, body("refused"))
                assert [(await hold)[0], (await queued)[0]] == [200, 200]
            metrics = scrape(srv)
    assert status == 429
    assert headers["Retry-After"] == "7"
    assert error["error"]["code"] == "queue_full"
    assert error["error"]["type"] == "rate_limit_error"
    assert "refused" not in [r.body["messages"][-1]["content"] for r in slow.requests]
    assert metrics["pacore_runs_total{outcome=queue_full}"] == 1
    assert metrics["pacore_runs_total{outcome=ok}"] == 2


async def test_a_queue_timeout_is_503_queue_timeout_with_retry_after() -> None:
    with ScriptedServer(latency=1.0).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow, max_concurrency=1, queue_timeout_s=0.2)) as srv:
            async with aiohttp.ClientSession() as session:
                hold = asyncio.ensure_future(post(session, srv, body("hold")))
                await until(lambda: srv.state.active == 1, "hold running")
                status, headers, error = await post(session, srv, body("late"))
                assert (await hold)[0] == 200
            metrics = scrape(srv)
    assert status == 503
    assert error["error"]["code"] == "queue_timeout"
    assert "Retry-After" in headers
    assert srv.state.queue.timed_out == 1
    assert metrics["pacore_runs_total{outcome=queue_timeout}"] == 1
    assert "late" not in [r.body["messages"][-1]["content"] for r in slow.requests]


async def test_a_client_that_hangs_up_while_queued_leaves_the_queue() -> None:
    with ScriptedServer(latency=0.5).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow, max_concurrency=1)) as srv:
            async with aiohttp.ClientSession() as session:
                hold = asyncio.ensure_future(post(session, srv, body("hold")))
                await until(lambda: srv.state.active == 1, "hold running")
                # A raw connection, closed by us once the server says it is queued.
                _, writer = await asyncio.open_connection("127.0.0.1", srv.server.config.port)
                payload = json.dumps(body("gone")).encode()
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\n"
                    + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
                await until(lambda: srv.state.queue.queued == 1, "queued")
                writer.close()
                await until(lambda: srv.state.queue.queued == 0, "left the queue")
                assert srv.state.queue.abandoned == 1
                assert (await hold)[0] == 200
            metrics = scrape(srv)
    assert "gone" not in [r.body["messages"][-1]["content"] for r in slow.requests]
    assert metrics["pacore_runs_total{outcome=cancelled}"] == 1
    assert srv.state.active == 0


# --------------------------------------------------------------------------- /metrics


def test_metrics_are_prometheus_text_with_the_documented_names() -> None:
    with ScriptedServer().run_in_thread() as a, ScriptedServer().run_in_thread() as b:  # noqa: SIM117
        with running_serve(settings(a, b)) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            replies = [
                client.chat.completions.create(
                    model="pacore:6", messages=[{"role": "user", "content": f"{i} + 1?"}]
                )
                for i in range(3)
            ]
            metrics = scrape(srv)
    types = metrics["__types__"]
    assert types["pacore_runs_running"] == "gauge"
    assert types["pacore_runs_queued"] == "gauge"
    assert types["pacore_queue_wait_seconds"] == "histogram"
    assert types["pacore_run_duration_seconds"] == "histogram"
    for counter in (
        "pacore_runs",
        "pacore_replica_samples",
        "pacore_replica_completion_tokens",
        "pacore_upstream_errors",
        "pacore_passthrough_requests",
    ):
        assert types[counter] == "counter", counter
    assert metrics["pacore_runs_running{}"] == 0 and metrics["pacore_runs_queued{}"] == 0
    assert metrics["pacore_queue_wait_seconds_count{}"] == 3
    assert metrics["pacore_run_duration_seconds_count{}"] == 3
    assert metrics["pacore_runs_total{outcome=ok}"] == 3
    samples = [metrics[f"pacore_replica_samples_total{{upstream={i}}}"] for i in (0, 1)]
    tokens = [metrics[f"pacore_replica_completion_tokens_total{{upstream={i}}}"] for i in (0, 1)]
    assert sum(samples) == 3 * (6 + 1) and all(s > 0 for s in samples)
    assert sum(tokens) == sum(r.usage.completion_tokens for r in replies if r.usage)


def test_upstream_errors_are_counted_by_kind() -> None:
    """A run answered, then one whose round fails: each failed call counted by its kind."""

    def fail(request: ScriptedRequest) -> int | None:
        return 503 if request.last_user == "doomed" else None

    with ScriptedServer(fail_when=fail).run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(settings(upstream)) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            reply = client.chat.completions.create(
                model="pacore:3", messages=[{"role": "user", "content": "q"}]
            )
            answered = scrape(srv)
            with pytest.raises(openai.APIStatusError) as failed_run:
                client.chat.completions.create(
                    model="pacore:2", messages=[{"role": "user", "content": "doomed"}]
                )
            metrics = scrape(srv)
    assert reply.usage is not None
    assert answered["pacore_upstream_errors_total{kind=status}"] == 0
    # One upstream: samples and tokens are counted from the finished runs.
    assert answered["pacore_replica_samples_total{upstream=0}"] == 3 + 1
    assert answered["pacore_replica_completion_tokens_total{upstream=0}"] == (
        reply.usage.completion_tokens
    )
    assert failed_run.value.status_code == 502
    assert metrics["pacore_upstream_errors_total{kind=status}"] == 2  # round 0's two calls
    assert metrics["pacore_runs_total{outcome=failed}"] == 1
    assert metrics["pacore_run_duration_seconds_count{}"] == 2


def test_error_kind_reads_the_recorded_class_name() -> None:
    assert error_kind("HTTP 500 from http://x/v1: {} (gave up after 1 attempts)") == "status"
    assert error_kind("timed out after 5s reading http://x") == "timeout"
    assert error_kind("cannot reach http://x: ClientConnectorError: refused") == "transport"
    assert error_kind("server returned no content (json, empty)") == "no_content"
    assert error_kind("UpstreamStatusError: HTTP 500 from http://x") == "status"
    assert error_kind("UpstreamTimeoutError: timed out") == "timeout"
    assert error_kind("NoContentError: empty") == "no_content"
    assert error_kind("ValueError: something") == "other"


# --------------------------------------------------------------------------- load


async def test_many_concurrent_sdk_clients_are_all_answered_with_the_defaults() -> None:
    """More clients than --max-concurrency (64): all answered, the queue's wait in /metrics.

    benchmarks/bench_serve_queue.py runs the same with 200 clients.
    """
    clients = 96
    lengths = LengthModel(median=40, sigma=0.3, max_length=200)
    async with ThroughputServer(throughput=20_000, per_sequence_cap=400, lengths=lengths) as up:
        with running_serve(ServeSettings(upstreams=(up.base_url,), model="throughput")) as srv:
            assert srv.state.settings.max_concurrency == 64  # the defaults

            async def one(i: int) -> str:
                sdk = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x")
                try:
                    reply = await sdk.chat.completions.create(
                        model="pacore:2", messages=[{"role": "user", "content": f"{i} + 1?"}]
                    )
                    return reply.choices[0].message.content or ""
                finally:
                    await sdk.close()

            answers = await asyncio.gather(*(one(i) for i in range(clients)))
            metrics = scrape(srv)
    assert all(answers) and len(answers) == clients
    assert metrics["pacore_runs_total{outcome=ok}"] == clients
    assert metrics["pacore_runs_total{outcome=queue_full}"] == 0
    assert metrics["pacore_queue_wait_seconds_count{}"] == clients
    # At most 64 found a free slot; the others waited in the queue for one.
    assert metrics["pacore_queue_wait_seconds_bucket{le=0.001}"] <= 64
    assert metrics["pacore_queue_wait_seconds_sum{}"] > 0
    assert srv.state.queue.admitted == clients
