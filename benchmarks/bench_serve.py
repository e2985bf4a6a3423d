"""``pacore serve``'s overhead against the library in-process, and the spread over replicas.

Same workload for both, measured in the same sitting: 200 concurrent clients,
one problem each, at ``--model`` (default ``pacore-high``: rounds 32, 4, 1 =
7,400 samples), against two scripted upstream replicas (each in its own
process, ``--latency`` seconds per request), at most 1,024 samples in flight.

- ``library``: this process runs the compiled graph itself, 200
  ``ainvoke`` calls at once, over :class:`MultiEndpointClient`.
- ``serve``: ``pacore serve --upstream A --upstream B`` in its own process;
  this process is 200 clients POSTing ``/v1/chat/completions`` (one pooled
  aiohttp session, so the client side costs little).
- ``serve-stream``: the same with ``stream: true`` (SSE progress + answer).

Prints, per variant, the median wall time over ``--repeats`` (variants
alternate) and its ratio to ``library``; the CPU seconds of the process that
runs the graph (this one for ``library``, the server process for the others:
on a shared 2-core machine this is the steadier overhead figure, since the
server variants also split the work over two processes); the median
per-request latency; and each replica's share of the samples.

    python benchmarks/bench_serve.py
    python benchmarks/bench_serve.py --model pacore:8,2 --latency 0.2 --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from workload import problems

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "pacore_graph" / "testing" / "scripted_server.py"
CONCURRENCY = 1024
VARIANTS = ("library", "serve", "serve-stream")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def start_upstream(latency: float) -> tuple[subprocess.Popen[str], str]:
    from pacore_graph.testing.loopback_server import spawn_server

    return spawn_server([sys.executable, str(SERVER), "--port", "0", "--latency", str(latency)])


def start_serve(upstreams: list[str]) -> tuple[subprocess.Popen[str], str]:
    from pacore_graph.testing.loopback_server import free_port

    port = free_port()
    argv = [sys.executable, "-m", "pacore_graph.cli", "serve", "--model", "scripted"]
    for url in upstreams:
        argv += ["--upstream", url]
    argv += [
        "--port",
        str(port),
        "--max-concurrency",
        "10000",
        "--max-samples-in-flight",
        str(CONCURRENCY),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(argv, env={**os.environ, "PACORE_SERVE_API_KEY": ""}, text=True)
    base = f"http://127.0.0.1:{port}"

    async def wait() -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(600):
                try:
                    async with session.get(f"{base}/health") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if proc.poll() is not None:
                    raise RuntimeError("pacore serve exited during start-up")
                await asyncio.sleep(0.1)
        raise RuntimeError("pacore serve did not start")

    asyncio.run(wait())
    return proc, base


# --------------------------------------------------------------------------- variants


async def run_library(upstreams: list[str], model: str, count: int) -> dict[str, Any]:
    from pacore_graph import build_pacore_graph
    from pacore_graph.graph.builder import ainvoke_pacore
    from pacore_graph.llm.multi_client import MultiEndpointClient
    from pacore_graph.serve import parse_model_name

    client = MultiEndpointClient(upstreams, "scripted")
    graph = build_pacore_graph(
        client, config={"rounds": parse_model_name(model), "max_concurrency": CONCURRENCY}
    )
    latencies: list[float] = []

    async def one(question: str) -> None:
        started = time.perf_counter()
        result = await ainvoke_pacore(graph, question)
        if not result.answer:
            raise RuntimeError("empty answer")
        latencies.append(time.perf_counter() - started)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(q) for q in problems(count)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    samples = [s.samples for s in client.stats()]
    await client.aclose()
    return {
        "wall": wall,
        "latency": statistics.median(latencies),
        "samples": samples,
        "cpu": cpu,
    }


async def run_serve(base: str, pid: int, model: str, count: int, stream: bool) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async with session.get(f"{base}/stats") as resp:
            before = [r["samples"] for r in (await resp.json())["replicas"]]

        async def one(question: str) -> None:
            body = {"model": model, "messages": [{"role": "user", "content": question}]}
            if stream:
                body["stream"] = True
            started = time.perf_counter()
            async with session.post(f"{base}/v1/chat/completions", json=body) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}: {raw[:200]!r}")
                if stream:
                    if not raw.rstrip().endswith(b"data: [DONE]") or b'"content"' not in raw:
                        raise RuntimeError(f"bad stream: {raw[-200:]!r}")
                elif not json.loads(raw)["choices"][0]["message"]["content"]:
                    raise RuntimeError("empty answer")
            latencies.append(time.perf_counter() - started)

        started, cpu = time.perf_counter(), cpu_seconds(pid)
        await asyncio.gather(*(one(q) for q in problems(count)))
        wall = time.perf_counter() - started
        cpu = cpu_seconds(pid) - cpu
        async with session.get(f"{base}/stats") as resp:
            after = [r["samples"] for r in (await resp.json())["replicas"]]
    samples = [b - a for a, b in zip(before, after, strict=True)]
    return {
        "wall": wall,
        "latency": statistics.median(latencies),
        "samples": samples,
        "cpu": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="pacore-high")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if "library" not in variants or any(v not in VARIANTS for v in variants):
        parser.error(f"--variants: choose from {VARIANTS}, including library (the baseline)")

    ups = [start_upstream(args.latency) for _ in range(2)]
    upstreams = [url for _, url in ups]
    serve_proc, base = start_serve(upstreams)
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    try:
        for rep in range(args.repeats):
            order = variants if rep % 2 == 0 else list(reversed(variants))
            for variant in order:
                if variant == "library":
                    out = asyncio.run(run_library(upstreams, args.model, args.clients))
                else:
                    stream = variant == "serve-stream"
                    out = asyncio.run(
                        run_serve(base, serve_proc.pid, args.model, args.clients, stream)
                    )
                results[variant].append(out)
                shares = "/".join(str(s) for s in out["samples"])
                print(
                    f"  repeat {rep + 1} {variant:13s} wall {out['wall']:6.2f} s  "
                    f"p50 request {out['latency']:6.2f} s  graph CPU {out['cpu']:6.2f} s  "
                    f"samples per replica {shares}",
                    file=sys.stderr,
                )
    finally:
        serve_proc.terminate()
        serve_proc.wait(60)
        for proc, _ in ups:
            proc.terminate()
            proc.wait(10)

    base_wall = statistics.median(r["wall"] for r in results["library"])
    base_cpu = statistics.median(r["cpu"] for r in results["library"])
    print(
        f"\n{args.clients} concurrent clients, {args.model}, 2 replicas at {args.latency:g} s "
        f"latency, median of {args.repeats}\n"
    )
    print(
        "| variant | wall | vs library | graph-side CPU | vs library "
        "| p50 request | samples per replica (share) |"
    )
    print("|---|---|---|---|---|---|---|")
    for variant in variants:
        runs = results[variant]
        wall = statistics.median(r["wall"] for r in runs)
        latency = statistics.median(r["latency"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        totals = [sum(col) for col in zip(*(r["samples"] for r in runs), strict=True)]
        total = sum(totals) or 1
        spread = " / ".join(f"{t} ({100 * t / total:.1f}%)" for t in totals)
        print(
            f"| {variant} | {wall:.2f} s | {wall / base_wall:.2f} | {cpu:.2f} s "
            f"| {cpu / base_cpu:.2f} | {latency:.2f} s | {spread} |"
        )


if __name__ == "__main__":
    main()
