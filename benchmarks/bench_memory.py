"""Memory per problem in flight: peak RSS of ``pacore run`` at two dataset sizes.

Every problem of the dataset is in flight at once (``--max-concurrency``
above the samples in flight), against the scripted server with a fixed
latency, so the slope of peak RSS over the number of problems is what one
problem in flight costs. The same is measured for the floor loop of
``bench_core.py`` (one request per sample). Each run is a fresh process;
its peak RSS comes from ``os.wait4``.

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --sizes 100,400 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_core import start_server  # noqa: E402
from workload import problems  # noqa: E402


def peak_rss_mb(cmd: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited with {proc.returncode}")
    return usage.ru_maxrss / 1024


def command(variant: str, url: str, count: int, work: Path) -> list[str]:
    data = work / f"p{count}.jsonl"
    if not data.exists():
        with data.open("w") as f:
            for i, q in enumerate(problems(count)):
                f.write(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": q}]}))
                f.write("\n")
    if variant == "floor":
        bench = str(ROOT / "benchmarks" / "bench_core.py")
        return [sys.executable, bench, "--one", "floor", "--url", url, "--problems", str(count)]
    out = work / f"out-{count}-{os.urandom(4).hex()}.jsonl"
    return [
        sys.executable, "-m", "pacore_graph.cli", "run", "--input", str(data), "--output",
        str(out), "--base-url", url, "--model", "scripted", "--preset", "high",
        "--max-concurrency", str(count * 37), "--no-progress",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,400", help="two dataset sizes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    small, large = (int(x) for x in args.sizes.split(","))
    server, url = start_server(args.latency)
    results: dict[tuple[str, int], list[float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            for _ in range(args.repeats):
                for variant in ("floor", "pacore-run"):
                    for size in (small, large):
                        rss = peak_rss_mb(command(variant, url, size, Path(tmp)), Path(tmp))
                        results.setdefault((variant, size), []).append(rss)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"peak RSS, median of {args.repeats}; server latency {args.latency:g}s; all in flight")
    print(f"{'variant':<12}{small:>8} pb MB{large:>8} pb MB{'MB per problem':>16}")
    for variant in ("floor", "pacore-run"):
        a = statistics.median(results[(variant, small)])
        b = statistics.median(results[(variant, large)])
        print(f"{variant:<12}{a:>13.0f}{b:>13.0f}{(b - a) / (large - small):>16.3f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
