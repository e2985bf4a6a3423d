"""``pacore train`` on two CPU processes against one: the marginal step time.

Issue 22 part 5 asks for the two-process training step time against one
process. This runs ``pacore train`` as users do, with the tiny model
(``pacore_graph.rl.tiny``, built here offline): one process (``python -m
pacore_graph.cli train --cpu``, ``OMP_NUM_THREADS=1``) and two
(``accelerate launch --multi_gpu --num_processes 2``, gloo), GRPO and PPO,
each at two lengths (``--max-steps`` SHORT and LONG). The step time is the
difference of the two runs' training times over the extra steps, so model
loading, TRL's set-up and saving cancel out. Each process does the same
work per step (GRPO: one prompt's ``--num-generations`` completions; PPO:
``--batch-size`` prompts), so two processes do twice the work per step, and
"work per second, 2 vs 1" is ``2 x step(1) / step(2)``.

    python benchmarks/bench_train_processes.py                    # grpo and ppo, 2 and 6 steps
    python benchmarks/bench_train_processes.py --algos grpo --repeats 3

On a shared machine set nothing: every process runs with
``OMP_NUM_THREADS=1`` (torch's intra-op threads waiting on each other on
shared cores made one step 10x slower, docs/rl.md).
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

from pacore_graph.rl.rewards import encode_ground_truth
from pacore_graph.testing.loopback_server import free_port

ROWS = 32


def write_trainset(path: Path) -> Path:
    rows = [
        {
            "prompt": [{"role": "user", "content": f"Problem {i}: what is {i} + {i}?"}],
            "ground_truth": encode_ground_truth({"answer": str(2 * i)}),
            "problem_id": f"p{i}",
            "category": None,
        }
        for i in range(ROWS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def train_seconds(
    algo: str, processes: int, steps: int, model: Path, data: Path, work: Path, tokens: int
) -> float:
    """One ``pacore train`` run; the training time it logged (model load excluded)."""
    out = work / f"{algo}-{processes}-{steps}-{os.getpid()}-{len(list(work.iterdir()))}"
    batch = ["--num-generations", "4", "--batch-size", "4"]
    if algo == "ppo":
        batch = ["--batch-size", "4"]
    train = ["train", "--dataset", str(data), "--model", str(model), "--algo", algo]
    train += ["--max-steps", str(steps), *batch, "--max-completion-length", str(tokens)]
    train += ["--output-dir", str(out), "--cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("WORLD_SIZE", None)
    env.pop("RANK", None)
    if processes == 1:
        cmd = [sys.executable, "-m", "pacore_graph.cli", *train]
    else:
        cmd = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch"]
        cmd += ["--multi_gpu", "--num_processes", str(processes), "--num_machines", "1"]
        cmd += ["--mixed_precision", "no", "--dynamo_backend", "no"]
        cmd += ["--main_process_port", str(free_port()), "-m", "pacore_graph.cli", *train]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} failed:\n{done.stderr[-3000:]}")
    log = json.loads((out / "pacore_train.json").read_text())
    if log["steps"] != steps or log["processes"] != processes:
        raise RuntimeError(f"expected {steps} steps on {processes}: {log['rank_steps']}")
    return float(log["wall_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", default="grpo,ppo")
    parser.add_argument("--short", type=int, default=2, help="steps of the shorter run")
    parser.add_argument("--long", type=int, default=6, help="steps of the longer run")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-completion-length", type=int, default=64)
    args = parser.parse_args()
    if args.long <= args.short:
        parser.error("--long must be more steps than --short")

    from pacore_graph.rl.tiny import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        work = Path(tmp)
        model = build_tiny_model(work / "model")
        data = write_trainset(work / "trainset.jsonl")
        print(f"load at start {os.getloadavg()[0]:.1f}", flush=True)
        for algo in args.algos.split(","):
            step: dict[int, float] = {}
            for processes in (1, 2):
                per_step = []
                for _ in range(args.repeats):
                    short, long = (
                        train_seconds(
                            algo, processes, n, model, data, work, args.max_completion_length
                        )
                        for n in (args.short, args.long)
                    )
                    per_step.append((long - short) / (args.long - args.short))
                    print(
                        f"  {algo} {processes} process(es): {args.short} steps {short:.1f} s, "
                        f"{args.long} steps {long:.1f} s",
                        flush=True,
                    )
                step[processes] = statistics.median(per_step)
            print(
                f"{algo}: step {step[1]:.2f} s on one process, {step[2]:.2f} s on two; "
                f"work per second, 2 vs 1: {2 * step[1] / step[2]:.2f}x",
                flush=True,
            )
        print(f"load at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
