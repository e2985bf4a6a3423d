"""The orchestrator's ceiling: one ``pacore run`` process against a growing model fleet.

A deployment at scale puts many GPUs behind PaCoRe; the question is how many
one ``pacore`` process can keep busy before its own event loop, not the
fleet, becomes the limit. This script simulates the fleet with replicas of
:mod:`pacore_graph.testing.throughput_server` (each a vLLM-like
processor-sharing server, ``--replica-throughput`` tokens/s), all in **one**
helper process so that they take one core at most, and grows it (by default
50k, 200k and 800k tokens/s in all; ``--full`` adds 3.2M and repeats). At
each size the problems are scaled so that the run's physical limit
(``tokens generated / total throughput``) stays about ``--target-s``
seconds, and two clients run, each a whole process given every replica:

- ``floor-n``: the baseline, a bare asyncio + pooled aiohttp loop doing the
  same rounds with one ``n=K`` request per round, sent to the replica with the
  fewest samples in flight (what ``pacore run`` does, with no framework);
- ``pacore``: ``pacore run --input ... --preset high`` with one ``--base-url``
  per replica, **durable as users get it** (the default SQLite checkpoints);
- ``pacore-nockpt`` (``--full``, or ``--variants``): the same with
  ``--checkpoint none``.

Per run it reports wall over the physical limit, the process's CPU seconds
per sample (``os.wait4``), the samples and tokens per second achieved, the
fleet process's CPU share (a fleet near 100% of a core is a fleet-bound run,
not an orchestrator-bound one), and for ``pacore`` its event-loop lag, which
``pacore run`` measures itself when ``PACORE_LOOP_LAG_FILE`` is set
(:mod:`pacore_graph.runs.loop_lag`). The *knee* is the first size at which
``pacore`` is more than ``--knee-ratio`` times the physical limit while the
floor is not: from there on the orchestrator is the limit, and its samples/s
there is the ceiling. ``docs/scale.md`` translates it into GPUs.

    python benchmarks/bench_fleet.py                 # 50k, 200k, 800k tok/s; ~2-3 min
    python benchmarks/bench_fleet.py --full          # + 3.2M, pacore-nockpt, 3 repeats
    python benchmarks/bench_fleet.py --sizes 100000,400000 --median 600
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from workload import floor_prompt, problems

ROOT = Path(__file__).resolve().parent.parent
SCHEDULE = (32, 4, 1)
SAMPLES_PER_PROBLEM = sum(SCHEDULE)
VARIANTS = ("floor-n", "pacore", "pacore-nockpt")
DEFAULT_SIZES = (50_000, 200_000, 800_000)
FULL_SIZES = (50_000, 200_000, 800_000, 3_200_000)
LAG_ENV = "PACORE_LOOP_LAG_FILE"  # pacore_graph.runs.loop_lag.ENV_VAR, not imported here


# --------------------------------------------------------------------------- the fleet


async def serve_fleet(args: argparse.Namespace) -> None:
    """Child process: ``--replicas`` throughput servers on one loop; prints their URLs."""
    import signal
    from dataclasses import asdict

    from aiohttp import web

    from pacore_graph.runs.loop_lag import LagProbe
    from pacore_graph.testing.throughput_server import LengthModel, ThroughputServer

    # The fleet's own loop lag: when the machine starves this process, its timers fire
    # late and the simulated GPUs slow down; a run with a lagging fleet is not the
    # orchestrator's limit.
    probe = LagProbe()

    class Replica(ThroughputServer):
        def _add_routes(self, app: web.Application) -> None:
            super()._add_routes(app)
            app.router.add_get("/fleet-lag", self._lag)
            app.router.add_post("/fleet-lag/reset", self._lag_reset)

        async def _lag(self, request: web.Request) -> web.Response:
            return web.json_response(asdict(probe.report()))

        async def _lag_reset(self, request: web.Request) -> web.Response:
            probe.lags.clear()
            return web.json_response({})

    lengths = LengthModel(median=args.median, sigma=args.sigma)
    servers = [
        Replica(
            throughput=args.replica_throughput,
            per_sequence_cap=args.per_sequence_cap,
            lengths=lengths,
        )
        for _ in range(args.replicas)
    ]
    for server in servers:
        await server.start()
    probing = asyncio.get_running_loop().create_task(probe.run())
    print("READY " + " ".join(s.base_url for s in servers), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    probing.cancel()
    for server in servers:
        await server.stop()


class Fleet:
    """The helper process and its replicas' URLs; sums their ``/stats``."""

    def __init__(self, args: argparse.Namespace, replicas: int) -> None:
        argv = [sys.executable, __file__, "--serve-fleet", "--replicas", str(replicas)]
        argv += ["--replica-throughput", str(args.replica_throughput)]
        argv += ["--per-sequence-cap", str(args.per_sequence_cap)]
        argv += ["--median", str(args.median), "--sigma", str(args.sigma)]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"fleet did not start: {line!r}")
        self.urls = line.split()[1:]
        self.throughput = args.replica_throughput * replicas

    def reset(self) -> None:
        for url in self.urls:
            http_json(url.removesuffix("/v1") + "/stats/reset", "POST")
        http_json(self.urls[0].removesuffix("/v1") + "/fleet-lag/reset", "POST")

    def lag(self) -> dict[str, Any]:
        """The fleet loop's lag since the last reset (``pacore_graph.runs.loop_lag`` report)."""
        return http_json(self.urls[0].removesuffix("/v1") + "/fleet-lag")

    def stats(self) -> dict[str, Any]:
        snaps = [http_json(url.removesuffix("/v1") + "/stats") for url in self.urls]
        firsts = [s["first_request_unix"] for s in snaps if s["first_request_unix"] is not None]
        lasts = [s["last_response_unix"] for s in snaps if s["last_response_unix"] is not None]
        tokens = sum(s["tokens_generated"] for s in snaps)
        return {
            "tokens": tokens,
            "sequences": sum(s["sequences"] for s in snaps),
            "requests": sum(s["requests"] for s in snaps),
            "limit_s": tokens / self.throughput,
            "first_unix": min(firsts) if firsts else None,
            "last_unix": max(lasts) if lasts else None,
            "busiest_share": max(s["tokens_generated"] for s in snaps) / max(tokens, 1),
        }

    def cpu_s(self) -> float:
        """User + system CPU seconds of the fleet process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --------------------------------------------------------------------------- floor-n


async def floor_n(urls: list[str], count: int, concurrency: int) -> None:
    """The same rounds as PaCoRe, one ``n=K`` request per round, least-loaded replica."""

    import aiohttp
    import jinja2

    from pacore_graph.control.limits import SequenceLimiter
    from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE

    template = jinja2.Template(SYNTHESIS_TEMPLATE)
    limiter = SequenceLimiter(concurrency)
    load = dict.fromkeys(urls, 0)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:

        async def post(messages: list[dict[str, Any]], n: int) -> list[str]:
            async with limiter.hold(n):
                url = min(load, key=load.__getitem__)
                load[url] += n
                try:
                    body = {"model": "throughput", "messages": messages, "n": n}
                    async with session.post(f"{url}/chat/completions", json=body) as resp:
                        data = await resp.json()
                finally:
                    load[url] -= n
            return [c["message"]["content"] or "" for c in data["choices"]]

        async def solve(question: str) -> None:
            messages: list[str] = []
            for r, k in enumerate(SCHEDULE):
                prompt = floor_prompt(template, question, messages, r)
                messages = [t for t in await post(prompt, k) if t]

        await asyncio.gather(*(solve(q) for q in problems(count)))


# --------------------------------------------------------------------------- one run


def child_env() -> dict[str, str]:
    extra = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + ([extra] if extra else []))}
    env.pop(LAG_ENV, None)
    return env


def http_json(url: str, method: str = "GET") -> dict[str, Any]:
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=60) as resp:
        data: dict[str, Any] = json.loads(resp.read())
        return data


def write_dataset(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, q in enumerate(problems(count)):
            record = {"id": f"p{i}", "messages": [{"role": "user", "content": q}]}
            f.write(json.dumps(record) + "\n")


def command(variant: str, fleet: Fleet, count: int, concurrency: int, work: Path) -> list[str]:
    if variant == "floor-n":
        argv = [sys.executable, __file__, "--floor", "--problems", str(count)]
        return [*argv, "--concurrency", str(concurrency), "--urls", ",".join(fleet.urls)]
    argv = [sys.executable, "-m", "pacore_graph.cli", "run"]
    argv += ["--input", str(work / f"problems-{count}.jsonl")]
    argv += ["--output", str(work / f"out-{time.monotonic_ns()}.jsonl")]
    for url in fleet.urls:
        argv += ["--base-url", url]
    argv += ["--model", "throughput", "--preset", "high", "--no-progress"]
    argv += ["--max-concurrency", str(concurrency)]
    if variant == "pacore-nockpt":
        argv += ["--checkpoint", "none"]
    return argv


def run_once(
    variant: str, fleet: Fleet, count: int, concurrency: int, work: Path
) -> dict[str, Any]:
    fleet.reset()
    env = child_env()
    lag_file = work / f"lag-{time.monotonic_ns()}.json"
    if variant != "floor-n":
        env[LAG_ENV] = str(lag_file)
    fleet_cpu = fleet.cpu_s()
    started_unix = time.time()
    started = time.perf_counter()
    proc = subprocess.Popen(
        command(variant, fleet, count, concurrency, work),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=work,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()  # small: errors only (--no-progress)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    stats = fleet.stats()
    cpu = usage.ru_utime + usage.ru_stime
    lag = json.loads(lag_file.read_text()) if lag_file.is_file() else None
    first, last = stats["first_unix"], stats["last_unix"]
    return {
        "variant": variant,
        "throughput": fleet.throughput,
        "replicas": len(fleet.urls),
        "problems": count,
        "wall_s": wall,
        "limit_s": stats["limit_s"],
        "ratio": wall / stats["limit_s"],
        "cpu_s": cpu,
        "cpu_us_per_sample": cpu / max(stats["sequences"], 1) * 1e6,
        "samples": stats["sequences"],
        "samples_per_s": stats["sequences"] / wall,
        "tokens_per_s": stats["tokens"] / wall,
        "requests": stats["requests"],
        "serving_s": None if first is None or last is None else last - first,
        # first request to last response over the limit: the run without start-up and exit
        "serving_ratio": None
        if first is None or last is None
        else (last - first) / stats["limit_s"],
        "first_request_s": None if first is None else first - started_unix,
        "fleet_cpu_share": (fleet.cpu_s() - fleet_cpu) / wall,
        "busiest_replica_share": stats["busiest_share"],
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "lag": lag,
        "fleet_lag": fleet.lag(),
    }


# --------------------------------------------------------------------------- the sweep


def mean_tokens(median: float, sigma: float) -> float:
    """The lognormal's mean: what a sample costs the fleet on average."""
    return median * math.exp(sigma * sigma / 2)


def plan(args: argparse.Namespace, size: float) -> tuple[int, int, int]:
    """(replicas, problems, samples in flight) for a fleet of ``size`` tokens/s."""
    replicas = max(1, round(size / args.replica_throughput))
    per_problem = SAMPLES_PER_PROBLEM * mean_tokens(args.median, args.sigma)
    count = max(10, min(args.max_problems, round(args.target_s * size / per_problem)))
    # Enough samples in flight to saturate every replica at its per-sequence cap, with a
    # 16x margin: an n=K request holds its K slots until its slowest sample is done, so
    # most slots wait on stragglers (at 4x the floor itself fell behind the fleet).
    concurrency = max(1024, int(16 * size / args.per_sequence_cap))
    return replicas, count, concurrency


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def lag_of(runs: list[dict[str, Any]], key: str) -> str:
    values = [r["lag"][key] for r in runs if r["lag"]]
    return f"{statistics.median(values):.0f}" if values else "-"


Results = dict[tuple[float, str], list[dict[str, Any]]]


def print_table(results: Results) -> None:
    print(
        f"{'tok/s':>9}{'repl':>5}{'probs':>6}  {'variant':<14}{'wall s':>7}{'limit s':>8}"
        f"{'w/limit':>8}{'serve/lim':>10}{'1st req':>8}{'CPU s':>7}{'us/smp':>7}{'smp/s':>8}"
        f"{'tok/s got':>10}"
        f"{'lag p50':>8}{'p99':>6}{'max ms':>7}{'fleet CPU':>10}{'fleet p99':>10}"
    )
    for (size, variant), runs in results.items():
        r0 = runs[0]
        print(
            f"{size:>9.3g}{r0['replicas']:>5}{r0['problems']:>6}  {variant:<14}"
            f"{median_of(runs, 'wall_s'):>7.2f}{median_of(runs, 'limit_s'):>8.2f}"
            f"{median_of(runs, 'ratio'):>8.2f}{median_of(runs, 'serving_ratio'):>10.2f}"
            f"{median_of(runs, 'first_request_s'):>8.2f}{median_of(runs, 'cpu_s'):>7.1f}"
            f"{median_of(runs, 'cpu_us_per_sample'):>7.0f}{median_of(runs, 'samples_per_s'):>8.0f}"
            f"{median_of(runs, 'tokens_per_s'):>10.3g}{lag_of(runs, 'p50_ms'):>8}"
            f"{lag_of(runs, 'p99_ms'):>6}{lag_of(runs, 'max_ms'):>7}"
            f"{median_of(runs, 'fleet_cpu_share'):>9.0%}"
            f"{statistics.median(r['fleet_lag']['p99_ms'] for r in runs):>9.0f}"
        )


def find_knee(results: Results, sizes: list[float], knee_ratio: float) -> str:
    """The first size where ``pacore`` serves past ``knee_ratio`` x the limit and the floor not.

    Serving span (first request to last response), not wall time: start-up
    and exit are a fixed cost per process, the knee is about throughput. The
    ceiling is the most samples/s ``pacore`` delivered while serving at any size.
    """
    served = {
        size: statistics.median(r["samples"] / r["serving_s"] for r in runs if r["serving_s"])
        for (size, variant), runs in results.items()
        if variant == "pacore"
    }
    best = max(served.items(), key=lambda item: item[1], default=None)
    ceiling = (
        ""
        if best is None
        else f"; ceiling seen: {best[1]:.0f} samples/s while serving (at {best[0]:.3g} tok/s)"
    )
    for size in sizes:
        mine = results.get((size, "pacore"))
        floor = results.get((size, "floor-n"))
        if not mine:
            continue
        ratio = median_of(mine, "serving_ratio")
        floor_ratio = None if floor is None else median_of(floor, "serving_ratio")
        if ratio <= knee_ratio:
            continue
        if floor_ratio is not None and floor_ratio > knee_ratio:
            return (
                f"at {size:.3g} tok/s the floor serves past {knee_ratio}x too: the machine limits"
            )
        floor_text = "-" if floor_ratio is None else f"{floor_ratio:.2f}"
        return (
            f"knee: at {size:.3g} tok/s ({mine[0]['replicas']} replicas) pacore run serves at "
            f"{ratio:.2f}x the physical limit (floor-n {floor_text}x), "
            f"{median_of(mine, 'cpu_us_per_sample'):.0f} us of CPU per sample" + ceiling
        )
    return f"no knee up to {sizes[-1]:.3g} tok/s (pacore within {knee_ratio}x)" + ceiling


def marginal_cpu(results: Results, sizes: list[float], variant: str) -> str:
    """CPU per extra sample between the two largest sizes: start-up cancels out.

    One event loop uses one core at most, so ``1 / marginal CPU`` is the most
    samples/s the process could sustain with a whole core to itself.
    """
    points = [
        (median_of(runs, "samples"), median_of(runs, "cpu_s"))
        for size in sizes
        if (runs := results.get((size, variant)))
    ]
    if len(points) < 2 or points[-1][0] <= points[-2][0]:
        return ""
    (n0, c0), (n1, c1) = points[-2], points[-1]
    per = (c1 - c0) / (n1 - n0)
    return (
        f"{variant}: {per * 1e6:.0f} us of CPU per extra sample between the two largest sizes"
        f" (start-up excluded): at most {1 / per:.0f} samples/s on one whole core"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", help="total tokens/s, comma-separated (default 50k,200k,800k)")
    parser.add_argument("--full", action="store_true", help="+3.2M tok/s, pacore-nockpt, 3 repeats")
    parser.add_argument("--repeats", type=int, help="runs per size and variant (default 1; full 3)")
    parser.add_argument("--variants", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--replica-throughput", type=float, default=50_000.0)
    parser.add_argument("--per-sequence-cap", type=float, default=2_000.0)
    parser.add_argument("--median", type=float, default=60.0, help="median completion tokens")
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--target-s", type=float, default=4.0, help="physical limit per run")
    parser.add_argument("--max-problems", type=int, default=2000)
    parser.add_argument("--knee-ratio", type=float, default=1.5)
    parser.add_argument("--json", type=Path, help="also write the raw runs here")
    parser.add_argument("--serve-fleet", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--replicas", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--problems", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--urls", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fleet:
        asyncio.run(serve_fleet(args))
        return
    if args.floor:
        asyncio.run(floor_n(args.urls.split(","), args.problems, args.concurrency))
        return
    sizes = [float(s) for s in args.sizes.split(",")] if args.sizes else None
    sizes = sizes or list(FULL_SIZES if args.full else DEFAULT_SIZES)
    default_variants = VARIANTS if args.full else ("floor-n", "pacore")
    variants = [v.strip() for v in (args.variants or ",".join(default_variants)).split(",")]
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    repeats = args.repeats or (3 if args.full else 1)
    load = os.getloadavg()
    results: Results = {}
    raw: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        work = Path(tmp)
        for size in sizes:
            replicas, count, concurrency = plan(args, size)
            write_dataset(work / f"problems-{count}.jsonl", count)
            fleet = Fleet(args, replicas)
            try:
                for rep in range(repeats):
                    order = variants if rep % 2 == 0 else list(reversed(variants))
                    for v in order:
                        result = run_once(v, fleet, count, concurrency, work)
                        results.setdefault((size, v), []).append(result)
                        raw.append(result)
                        print(
                            f"  {size:.3g} tok/s {v}: {result['wall_s']:.2f} s, limit "
                            f"{result['limit_s']:.2f} s, CPU {result['cpu_s']:.1f} s",
                            file=sys.stderr,
                        )
            finally:
                fleet.close()
    ordered = {k: results[k] for s in sizes for v in variants if (k := (s, v)) in results}
    print(
        f"\nhigh (32,4,1) = {SAMPLES_PER_PROBLEM} samples per problem; replicas of "
        f"{args.replica_throughput:g} tok/s ({args.per_sequence_cap:g} per sequence), lengths "
        f"lognormal(median {args.median:g}, sigma {args.sigma:g}, mean "
        f"{mean_tokens(args.median, args.sigma):.0f}); problems sized for a {args.target_s:g} s "
        f"limit (at most {args.max_problems}); median of {repeats}; load at start {load[0]:.1f}"
    )
    print_table(ordered)
    print(find_knee(ordered, sizes, args.knee_ratio))
    for v in variants:
        if v != "floor-n" and (line := marginal_cpu(ordered, sizes, v)):
            print(line)
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
