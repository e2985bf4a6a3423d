"""PaCoRe against a throughput-bound server: wall time over the physical limit.

A batching server (vLLM) shares its decode throughput among the sequences in
flight and reasoning lengths are heavy-tailed, so a run cannot finish before
``tokens generated / throughput`` (its *physical limit*); an orchestrator
approaches it only by keeping the server saturated across problems and
rounds. The server here is :mod:`pacore_graph.testing.throughput_server` in
its own process (50,000 tokens/s shared, 2,000 tokens/s per sequence at most,
lognormal lengths with median 60 tokens and sigma 1.0). Each variant runs in
a fresh process against it, the server's counters reset before each run:

- ``floor``: a bare asyncio + pooled aiohttp loop doing the same rounds, one
  request per sample.
- ``floor-n``: the same loop, each round's K samples as one ``n=K`` request.
- ``pacore-run``: ``pacore run --input ... --preset high`` as a whole process
  (start-up included); also reports when its first request reached the server.
- ``pacore-q90`` / ``pacore-q75``: ``pacore run`` with ``--round-quorum 0.9``
  / ``0.75`` (straggler control). A round stays one ``n=K`` request, streamed,
  so each sample counts for the quorum as it finishes and the stragglers are
  cancelled upstream by disconnecting (a client without streamed ``n`` falls
  back to one request per explorer).
- ``public``: the public PaCoRe pipeline (github.com/stepfun-ai/PaCoRe), when
  ``--public DIR`` points at a checkout of it (run from a temp dir, never
  copied here; needs ``loguru``). Non-streaming, ``max_concurrent`` 1024.

Every variant makes at most 1,024 samples in flight. Prints, per variant, the
median wall time, the physical limit of that run, their ratio, when the first
request reached the server after the process started, and the serving span
(first request to last response) over the limit: the run without start-up.

    python benchmarks/bench_throughput.py
    python benchmarks/bench_throughput.py --repeats 5 --public /tmp/PaCoRe
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
CONCURRENCY = 1024
VARIANTS = ("floor", "floor-n", "pacore-run", "pacore-q90", "pacore-q75", "public")
#: Straggler-control variants: ``pacore run`` plus these flags.
ROUND_CONTROL = {
    "pacore-q90": ["--round-quorum", "0.9"],
    "pacore-q75": ["--round-quorum", "0.75"],
}


# --------------------------------------------------------------------------- floor


async def floor(base_url: str, count: int, batched: bool) -> None:
    """Same rounds, prompt rendering and compaction as PaCoRe, no framework."""

    import aiohttp
    import jinja2

    from pacore_graph.control.limits import SequenceLimiter
    from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE

    template = jinja2.Template(SYNTHESIS_TEMPLATE)
    limiter = SequenceLimiter(CONCURRENCY)
    url = f"{base_url}/chat/completions"
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:

        async def post(messages: list[dict[str, Any]], n: int) -> list[str]:
            async with limiter.hold(n):
                body: dict[str, Any] = {"model": "throughput", "messages": messages}
                if n > 1:
                    body["n"] = n
                async with session.post(url, json=body) as resp:
                    data = await resp.json()
            return [c["message"]["content"] or "" for c in data["choices"]]

        async def solve(question: str) -> str:
            messages: list[str] = []
            for r, k in enumerate(SCHEDULE):
                prompt = floor_prompt(template, question, messages, r)
                if batched:
                    texts = await post(prompt, k)
                else:
                    groups = await asyncio.gather(*(post(prompt, 1) for _ in range(k)))
                    texts = [g[0] for g in groups]
                messages = [t for t in texts if t]
            return messages[0]

        await asyncio.gather(*(solve(q) for q in problems(count)))


# --------------------------------------------------------------------------- processes

PUBLIC_SCRIPT = """
import sys
from pacore.batch_inference.base_exp import Exp
from loguru import logger
logger.remove()  # its per-round INFO lines to a terminal are not what we measure
class BenchExp(Exp):
    model_name = "throughput"
    api_base = sys.argv[1] + "/chat/completions"
    data_path = sys.argv[2]
    output_dir = "outputs"
    max_tokens = None
    stream = False
    num_responses_per_round = [32, 4]
    max_concurrent = 1024
BenchExp().run()
"""


def write_dataset(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, q in enumerate(problems(count)):
            f.write(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": q}]}))
            f.write("\n")


def command(variant: str, url: str, count: int, work: Path, public: Path | None) -> list[str]:
    if variant in ("floor", "floor-n"):
        return [sys.executable, __file__, "--one", variant, "--url", url, "--problems", str(count)]
    if variant == "pacore-run" or variant in ROUND_CONTROL:
        return [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            "run",
            "--input",
            str(work / "problems.jsonl"),
            "--output",
            str(work / f"out-{time.monotonic_ns()}.jsonl"),
            "--base-url",
            url,
            "--model",
            "throughput",
            "--preset",
            "high",
            "--max-concurrency",
            str(CONCURRENCY),
            "--no-progress",
            *ROUND_CONTROL.get(variant, []),
        ]
    if public is None:
        raise ValueError("the public variant needs --public DIR")
    script = work / "bench_public_exp.py"
    script.write_text(PUBLIC_SCRIPT)
    return [sys.executable, str(script), url, str(work / "problems.jsonl")]


def http_json(url: str, method: str = "GET") -> dict[str, Any]:
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        data: dict[str, Any] = json.loads(resp.read())
        return data


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    # Here, not at the top: the floor's child processes run this script and
    # must not pay for importing pacore_graph.
    from pacore_graph.testing.loopback_server import spawn_server

    argv = [sys.executable, "-m", "pacore_graph.testing.throughput_server"]
    argv += ["--throughput", str(args.throughput), "--per-sequence-cap", str(args.per_sequence_cap)]
    argv += ["--median", str(args.median), "--sigma", str(args.sigma)]
    return spawn_server(argv, env=child_env(None))


def child_env(public: Path | None) -> dict[str, str]:
    paths = [str(ROOT)] + ([str(public)] if public else [])
    extra = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + ([extra] if extra else []))}


def run_once(variant: str, url: str, count: int, work: Path, public: Path | None) -> dict[str, Any]:
    root = url.removesuffix("/v1")
    http_json(root + "/stats/reset", "POST")
    cmd = command(variant, url, count, work, public)
    started_unix = time.time()
    started = time.perf_counter()
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=child_env(public if variant == "public" else None),
        cwd=work,
        check=False,
    )
    wall = time.perf_counter() - started
    if out.returncode != 0:
        raise RuntimeError(f"{variant} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    stats = http_json(root + "/stats")
    first = stats["first_request_unix"]
    last = stats["last_response_unix"]
    return {
        "variant": variant,
        "wall_s": wall,
        "limit_s": stats["physical_limit_seconds"],
        "tokens": stats["tokens_generated"],
        "sequences": stats["sequences"],
        "requests": stats["requests"],
        "first_request_s": None if first is None else first - started_unix,
        # First request to last response: the run without its process start-up.
        "serving_s": None if first is None or last is None else last - first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--public", type=Path, help="a checkout of stepfun-ai/PaCoRe")
    parser.add_argument("--throughput", type=float, default=50_000.0)
    parser.add_argument("--per-sequence-cap", type=float, default=2_000.0)
    parser.add_argument("--median", type=float, default=60.0)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--json", type=Path, help="also write the raw runs here")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # child process: one floor variant
        asyncio.run(floor(args.url, args.problems, batched=args.one == "floor-n"))
        return
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    if "public" in variants and args.public is None:
        print("(skipping 'public': give --public DIR, a checkout of stepfun-ai/PaCoRe)")
        variants.remove("public")
    load = os.getloadavg()
    server, url = start_server(args)
    raw: list[dict[str, Any]] = []
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
            work = Path(tmp)
            write_dataset(work / "problems.jsonl", args.problems)
            for rep in range(args.repeats):
                order = variants if rep % 2 == 0 else list(reversed(variants))
                for v in order:
                    result = run_once(v, url, args.problems, work, args.public)
                    runs[v].append(result)
                    raw.append(result)
                    print(
                        f"  {v}: {result['wall_s']:.2f} s, limit {result['limit_s']:.2f} s",
                        file=sys.stderr,
                    )
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(
        f"\n{args.problems} problems x high (32,4,1) = {args.problems * 37} samples; server "
        f"{args.throughput:g} tok/s shared, {args.per_sequence_cap:g} per sequence, lengths "
        f"lognormal(median {args.median:g}, sigma {args.sigma:g}); {CONCURRENCY} in flight; "
        f"median of {args.repeats}; load at start {load[0]:.1f}"
    )
    print(
        f"{'variant':<12}{'wall s':>9}{'limit s':>9}{'wall/limit':>12}{'1st req s':>11}"
        f"{'serving/limit':>15}{'requests':>10}  wall/limit per run"
    )
    for v in variants:
        med = statistics.median(r["wall_s"] for r in runs[v])
        lim = statistics.median(r["limit_s"] for r in runs[v])
        ratio = statistics.median(r["wall_s"] / r["limit_s"] for r in runs[v])
        firsts = [r["first_request_s"] for r in runs[v] if r["first_request_s"] is not None]
        first = f"{statistics.median(firsts):.2f}" if firsts else "-"
        reqs = statistics.median(r["requests"] for r in runs[v])
        serving = statistics.median(r["serving_s"] / r["limit_s"] for r in runs[v])
        print(
            f"{v:<12}{med:>9.2f}{lim:>9.2f}{ratio:>12.2f}{first:>11}{serving:>15.2f}{reqs:>10.0f}  "
            + " ".join(f"{r['wall_s'] / r['limit_s']:.2f}" for r in runs[v])
        )
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
