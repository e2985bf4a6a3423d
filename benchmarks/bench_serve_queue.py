"""``pacore serve`` under a burst: 200 concurrent ``openai`` SDK clients, all answered?

The question a proxy such as optillm answers with "yes": the same
throughput-bound upstream, 200 clients at once, each its own
``openai.AsyncOpenAI`` with the SDK's defaults (two retries). Two variants,
each a real ``pacore serve`` process with its default flags over one
throughput server (:mod:`pacore_graph.testing.throughput_server`, its own
process, a batching GPU's pace):

- ``queue``: the defaults (``--max-concurrency 64``, ``--max-queue 1024``,
  ``--queue-timeout 300``): requests over 64 wait in the FIFO queue;
- ``no-queue``: ``--max-queue 0``, the server as it was before the queue: over
  64 runs, an immediate 429 (the SDK retries twice after ~1 s, then gives up).

Prints, per variant: answered / refused, p50 and p95 latency per client, the
queue's wait as ``/metrics`` reports it (count, mean, p50/p95 from the
histogram's buckets), the most requests seen queued at once, and the wall
time. The expectation, optillm's: all 200 answered.

    python benchmarks/bench_serve_queue.py
    python benchmarks/bench_serve_queue.py --clients 200 --model pacore-low --throughput 20000
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pacore_graph.testing.loopback_server import free_port, spawn_server  # noqa: E402

VARIANTS: dict[str, list[str]] = {"queue": [], "no-queue": ["--max-queue", "0"]}


def metrics(root: str) -> dict[str, Any]:
    """``/metrics`` as {name: value} and the queue-wait histogram's buckets."""
    text = httpx.get(f"{root}/metrics", timeout=10).text
    values: dict[str, Any] = {"buckets": []}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "pacore_queue_wait_seconds_bucket":
                values["buckets"].append((float(s.labels["le"]), s.value))
            elif not s.labels:
                values[s.name] = s.value
            elif s.name == "pacore_runs_total":
                values[f"runs_{s.labels['outcome']}"] = s.value
    return values


def bucket_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket holding quantile ``q`` (Prometheus' histogram_quantile)."""
    buckets = sorted(buckets)
    total = buckets[-1][1]
    for upper, count in buckets:
        if count >= q * total:
            return upper
    return math.inf


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


async def burst(base_url: str, clients: int, model: str) -> tuple[list[float], int]:
    """``clients`` SDK clients at once; the latencies of those answered and the refused count."""
    latencies: list[float] = []
    refused = 0

    async def one(i: int) -> None:
        nonlocal refused
        sdk = openai.AsyncOpenAI(base_url=base_url, api_key="x", timeout=600)
        started = time.perf_counter()
        try:
            reply = await sdk.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": f"Problem {i}: what is {i} + 17?"}],
            )
            if reply.choices[0].message.content:
                latencies.append(time.perf_counter() - started)
        except openai.APIError:
            refused += 1
        finally:
            await sdk.close()

    await asyncio.gather(*(one(i) for i in range(clients)))
    return latencies, refused


async def watch_queue(root: str, peak: list[float], stop: asyncio.Event) -> None:
    async with httpx.AsyncClient() as http:
        while not stop.is_set():
            try:
                text = (await http.get(f"{root}/metrics", timeout=5)).text
                for line in text.splitlines():
                    if line.startswith("pacore_runs_queued "):
                        peak[0] = max(peak[0], float(line.split()[1]))
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)


def run_variant(name: str, upstream: str, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "pacore_graph.cli", "serve", "--upstream", upstream]
    argv += ["--model", "throughput", "--port", str(port), "--log-level", "error"]
    proc = subprocess.Popen([*argv, *VARIANTS[name]], stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{root}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        peak = [0.0]

        async def measured() -> tuple[list[float], int]:
            stop = asyncio.Event()
            watcher = asyncio.ensure_future(watch_queue(root, peak, stop))
            try:
                return await burst(f"{root}/v1", args.clients, args.model)
            finally:
                stop.set()
                await watcher

        started = time.perf_counter()
        latencies, refused = asyncio.run(measured())
        wall = time.perf_counter() - started
        seen = metrics(root)
    finally:
        proc.terminate()
        proc.wait(60)
    count = seen.get("pacore_queue_wait_seconds_count", 0.0)
    return {
        "variant": name,
        "answered": len(latencies),
        "refused": refused,
        "p50": pct(latencies, 0.5),
        "p95": pct(latencies, 0.95),
        "wait_count": count,
        "wait_mean": seen.get("pacore_queue_wait_seconds_sum", 0.0) / count if count else 0.0,
        "wait_p50": bucket_quantile(seen["buckets"], 0.5) if count else 0.0,
        "wait_p95": bucket_quantile(seen["buckets"], 0.95) if count else 0.0,
        "queue_full": seen.get("runs_queue_full", 0.0),
        "peak_queued": peak[0],
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--model", default="pacore-low", help="the method each client asks for")
    parser.add_argument("--throughput", type=float, default=20_000.0, help="upstream tokens/s")
    parser.add_argument("--median", type=float, default=200.0, help="median completion tokens")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    upstream_argv = [sys.executable, "-m", "pacore_graph.testing.throughput_server"]
    upstream_argv += ["--throughput", str(args.throughput), "--median", str(args.median)]
    upstream_argv += ["--sigma", "0.5", "--max-length", "2000"]
    upstream, base_url = spawn_server(upstream_argv)
    try:
        rows = []
        for name in args.variants.split(","):
            row = run_variant(name, base_url, args)
            rows.append(row)
            print(
                f"{name:>9}: answered {row['answered']}/{args.clients}, refused "
                f"{row['refused']} (429 queue_full at the server: {row['queue_full']:.0f}); "
                f"latency p50 {row['p50']:.2f} s p95 {row['p95']:.2f} s; queue wait "
                f"(/metrics) n={row['wait_count']:.0f} mean {row['wait_mean']:.2f} s "
                f"p50<={row['wait_p50']:g} s p95<={row['wait_p95']:g} s; peak queued "
                f"{row['peak_queued']:.0f}; wall {row['wall']:.1f} s",
                flush=True,
            )
    finally:
        upstream.terminate()
        upstream.wait(30)
    expected = [r["variant"] for r in rows if r["answered"] == args.clients]
    print(f"all {args.clients} answered (optillm's result): {', '.join(expected) or 'none'}")


if __name__ == "__main__":
    main()
