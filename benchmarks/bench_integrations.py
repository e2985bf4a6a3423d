"""What each integration costs per problem against the direct path, in one sitting.

The same easy-arithmetic problems, the same scripted oracle server (its own
process). Each path runs in its own process, warmed up, then over
``--small`` and ``--large`` problems alternately, ``--reps`` times: the
difference of the medians over ``large - small`` problems is the marginal
cost per problem (imports and each run's fixed set-up cancel out; the small
run's time is reported apart). Wall and CPU (``process_time``: all threads):

- ``inspect``: ``inspect_ai.eval(task, model="pacore/pacore-low/scripted")``
  (Inspect's whole loop: samples, scorer, log file) against the direct path,
  :func:`~pacore_graph.eval.harness.run_eval` of ``pacore:low`` (what ``pacore
  eval`` runs; no checkpointer on either side);
- ``verifiers``: ``evaluate(load_environment(...))`` (verifiers' rollout loop:
  interception server, harness, trace, reward) over the problems' synthesis
  prompts against ``run_eval`` of ``single`` on the same prompts (one call
  each, graded by the same grader);
- ``anthropic``: one ``pacore serve`` process, each problem sent in turn
  through the ``anthropic`` SDK (``/v1/messages``) and the ``openai`` SDK
  (``/v1/chat/completions``): the client's wall time per request and the
  server's CPU per request (from ``/proc``), medians.

Absolute figures need a quiet machine; the ratios to the direct path are
what the docs quote, with the load this prints.

    python benchmarks/bench_integrations.py
    python benchmarks/bench_integrations.py --small 4 --large 20 --reps 3
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pacore_graph.testing.loopback_server import free_port, spawn_server  # noqa: E402

BIN = Path(sys.executable).parent
PATHS = ("direct-low", "inspect", "direct-single", "verifiers")


def easy_problems(n: int) -> list[dict[str, Any]]:
    from pacore_graph.eval.datasets import easy_arithmetic_problems

    return easy_arithmetic_problems(n, seed=0)


def synthesis_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each problem's synthesis prompt over three references (one right), as a trainset row."""
    from pacore_graph.rl.rewards import encode_ground_truth
    from pacore_graph.values.prompts import synthesis_messages

    rows = []
    for record in records:
        truth = int(record["ground_truth"]["answer"])
        refs = [f"So the answer is \\boxed{{{truth + d}}}." for d in (0, 1, 2)]
        rows.append(
            {
                "prompt": synthesis_messages(record["messages"], refs),
                "ground_truth": encode_ground_truth(record["ground_truth"]),
                "problem_id": record["id"],
                "category": "math",
            }
        )
    return rows


def inspect_task(records: list[dict[str, Any]]) -> Any:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import pattern
    from inspect_ai.solver import generate

    samples = [
        Sample(id=r["id"], input=r["messages"][-1]["content"], target=r["ground_truth"]["answer"])
        for r in records
    ]
    return Task(dataset=samples, solver=generate(), scorer=pattern(r"boxed\{(-?\d+)\}"))


def runner(path: str, url: str, folder: Path) -> Callable[[list[dict[str, Any]]], None]:
    """One run of ``path`` over a list of problems, in this process."""
    if path == "inspect":
        from inspect_ai import eval as inspect_eval

        def run_inspect(records: list[dict[str, Any]]) -> None:
            (log,) = inspect_eval(
                inspect_task(records),
                model="pacore/pacore-low/scripted",
                model_base_url=url,
                seed=1,
                display="none",
                log_dir=str(folder / "logs"),
            )
            assert log.status == "success", log.error

        return run_inspect
    if path == "verifiers":
        from pacore_graph.rl.rows import write_jsonl
        from pacore_graph.rl.verifiers_env import evaluate, load_environment

        def run_verifiers(records: list[dict[str, Any]]) -> None:
            trainset = folder / f"trainset_{len(records)}.jsonl"
            write_jsonl(trainset, synthesis_rows(records))
            env = load_environment(str(trainset))
            episodes = asyncio.run(
                evaluate(env, base_url=url, model="scripted", sampling={"seed": 1}, api_key_var="X")
            )
            assert all(e.ok for e in episodes)

        return run_verifiers

    from pacore_graph.eval.harness import run_eval
    from pacore_graph.eval.methods import parse_method
    from pacore_graph.llm.client import OpenAICompatClient
    from pacore_graph.runs.runner import DatasetRecord
    from pacore_graph.settings.config import PaCoReConfig

    method = parse_method("pacore:low" if path == "direct-low" else "single")
    count = iter(range(10**6))

    def run_direct(records: list[dict[str, Any]]) -> None:
        if path == "direct-single":  # the synthesis prompts, as eval records
            records = [
                {**r, "messages": row["prompt"]}
                for r, row in zip(records, synthesis_rows(records), strict=True)
            ]

        async def go() -> None:
            client = OpenAICompatClient(url, "scripted")
            try:
                await run_eval(
                    [
                        DatasetRecord(
                            id=r["id"],
                            messages=tuple(r["messages"]),
                            line=i,
                            ground_truth=r["ground_truth"],
                            raw=r,
                        )
                        for i, r in enumerate(records, 1)
                    ],
                    [method],
                    client,
                    config=PaCoReConfig().with_settings({"seed": 1}),
                    out_dir=folder / f"eval{next(count)}",
                    progress=False,
                )
            finally:
                await client.aclose()

        asyncio.run(go())

    return run_direct


def measure(path: str, url: str, small: int, large: int, reps: int) -> dict[str, float]:
    """In this process: warm up, then alternate small and large runs; marginal per problem."""
    with tempfile.TemporaryDirectory() as tmp:
        run = runner(path, url, Path(tmp))
        records = easy_problems(large)
        run(records[:2])  # imports, first compiles and connections out of the figures
        walls: dict[int, list[float]] = {small: [], large: []}
        cpus: dict[int, list[float]] = {small: [], large: []}
        for _ in range(reps):
            for n in (small, large):
                wall0, cpu0 = time.perf_counter(), time.process_time()
                run(records[:n])
                walls[n].append(time.perf_counter() - wall0)
                cpus[n].append(time.process_time() - cpu0)
    wall = {n: statistics.median(v) for n, v in walls.items()}
    cpu = {n: statistics.median(v) for n, v in cpus.items()}
    return {
        "small_wall": wall[small],
        "small_cpu": cpu[small],
        "wall": (wall[large] - wall[small]) / (large - small),
        "cpu": (cpu[large] - cpu[small]) / (large - small),
    }


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_runs(url: str, n: int, reps: int) -> dict[str, dict[str, float]]:
    """Per request: client wall and server CPU, through /v1/messages and /v1/chat/completions."""
    import anthropic
    import httpx
    import openai

    questions = [r["messages"] for r in easy_problems(n)]
    port = free_port()
    proc = subprocess.Popen(
        [BIN / "pacore", "serve", "--upstream", url, "--model", "scripted", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(f"{root}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("pacore serve did not start")
            time.sleep(0.2)
        claude = anthropic.Anthropic(base_url=root, api_key="x", max_retries=0)
        chat = openai.OpenAI(base_url=f"{root}/v1", api_key="x", max_retries=0)

        def via_messages(messages: list[dict[str, Any]]) -> None:
            claude.messages.create(
                model="pacore-low", max_tokens=512, messages=messages, extra_body={"seed": 1}
            )

        def via_chat(messages: list[dict[str, Any]]) -> None:
            chat.chat.completions.create(
                model="pacore-low",
                max_tokens=512,
                messages=messages,  # type: ignore[arg-type]
                seed=1,
            )

        paths = {"chat": via_chat, "anthropic": via_messages}
        for send in paths.values():  # warm-up
            send(questions[0])
        walls: dict[str, list[float]] = {p: [] for p in paths}
        cpus: dict[str, list[float]] = {p: [] for p in paths}
        for _ in range(reps):
            for name, send in paths.items():
                cpu0 = process_cpu(proc.pid)
                for messages in questions:
                    t0 = time.perf_counter()
                    send(messages)
                    walls[name].append(time.perf_counter() - t0)
                cpus[name].append((process_cpu(proc.pid) - cpu0) / len(questions))
        return {
            name: {"wall": statistics.median(walls[name]), "cpu": statistics.median(cpus[name])}
            for name in paths
        }
    finally:
        proc.terminate()
        proc.wait(60)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=4)
    parser.add_argument("--large", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)  # one path, in-process
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.path:
        print(json.dumps(measure(args.path, args.url, args.small, args.large, args.reps)))
        return 0
    load_before = os.getloadavg()
    server, url = spawn_server(
        [sys.executable, "-m", "pacore_graph.testing.scripted_server", "--port", "0",
         "--responder", "oracle"]
    )  # fmt: skip
    results: dict[str, dict[str, float]] = {}
    try:
        for path in PATHS:
            sizes = ["--small", str(args.small), "--large", str(args.large)]
            out = subprocess.run(
                [sys.executable, __file__, "--path", path, "--url", url, *sizes,
                 "--reps", str(args.reps)],
                capture_output=True, text=True, env={**os.environ, "X": "x"},
            )  # fmt: skip
            if out.returncode != 0:
                raise RuntimeError(f"{path} failed:\n{out.stderr[-3000:]}")
            results[path] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {path}: {results[path]}", file=sys.stderr)
        served = serve_runs(url, args.large, args.reps)
    finally:
        server.terminate()
        server.wait(30)

    print(f"load average before / after: {load_before[0]:.1f} / {os.getloadavg()[0]:.1f}")
    print(f"in-process, {args.small} then {args.large} problems, medians of {args.reps}")
    print(f"{'path':40} {'small run':>14} {'per problem':>16} {'vs direct':>15}")
    print(f"{'':40} {'wall/CPU s':>14} {'wall/CPU ms':>16} {'wall / CPU':>15}")
    labels = {
        "direct-low": ("run_eval pacore:low (pacore eval)", "direct-low"),
        "inspect": ("inspect eval pacore/pacore-low", "direct-low"),
        "direct-single": ("run_eval single (synthesis prompts)", "direct-single"),
        "verifiers": ("verifiers evaluate (same prompts)", "direct-single"),
    }
    for path, (label, base) in labels.items():
        r, b = results[path], results[base]
        print(
            f"{label:40} {r['small_wall']:6.2f}/{r['small_cpu']:5.2f}  "
            f"{r['wall'] * 1e3:7.1f}/{r['cpu'] * 1e3:6.1f}  "
            f"{r['wall'] / b['wall']:6.2f}x/{r['cpu'] / b['cpu']:5.2f}x"
        )
    print(f"pacore serve, {args.large} requests in turn x {args.reps}, pacore-low, medians")
    chat = served["chat"]
    for name, label in (
        ("chat", "/v1/chat/completions (openai SDK)"),
        ("anthropic", "/v1/messages (anthropic SDK)"),
    ):
        r = served[name]
        print(
            f"{label:40} client wall {r['wall'] * 1e3:6.1f} ms, server CPU {r['cpu'] * 1e3:6.1f} "
            f"ms  {r['wall'] / chat['wall']:5.2f}x/{r['cpu'] / chat['cpu']:5.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
