"""``pacore train`` on two processes: ``accelerate launch`` over gloo on the CPU.

Each run is the real thing: ``accelerate launch --multi_gpu --num_processes
2`` (torchrun underneath) starts two ``pacore train --cpu`` processes, which
accelerate joins into one gloo process group; TRL's GRPO and PPO trainers
then split every batch between the ranks. The tiny random-weight model keeps
it to seconds. The grader (a ``module:function`` written here) records which
rank graded which problem, so the test sees that both ranks generated and
rewarded completions, on *different* problems (two independent one-process
runs with the same seed would grade the same ones), and the summary's
``rank_steps`` that both ranks stepped.

``accelerate launch --cpu --num_processes 2``, which starts only one
process (accelerate leaves several CPU processes to mpirun), is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.rl.processes import LaunchError, Processes, check_launch, current_processes
from pacore_graph.rl.rewards import encode_ground_truth
from pacore_graph.testing.loopback_server import free_port

LAYER_WEIGHT = "model.layers.0.self_attn.q_proj.weight"
#: Eight problems with distinct answers: PPO's two steps on two ranks take all eight.
ROWS = 8

GRADER = """
import json, os, zlib
def score(response, ground_truth):
    with open(os.path.join({folder!r}, "rank-" + os.environ.get("RANK", "none")), "a") as f:
        f.write(json.dumps(ground_truth["answer"]) + "\\n")
    return (zlib.crc32(response.encode()) % 1000) / 999
"""


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


def accelerate(*launch: str, train: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("WORLD_SIZE", None)
    env.pop("RANK", None)
    cmd = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", *launch]
    cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["-m", "pacore_graph.cli", "train", *train]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False
    )


def load_weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_both_ranks_train_their_share_and_the_saved_weights_move(
    algo: str, tiny_model: Path, tmp_path: Path
) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    (tmp_path / "rank_grader.py").write_text(GRADER.format(folder=str(graded)))
    batch = ["--num-generations", "2"] if algo == "grpo" else []
    proc = accelerate(
        "--multi_gpu", "--num_processes", "2", "--main_process_port", str(free_port()),
        train=[
            "--dataset", str(write_trainset(tmp_path / "trainset.jsonl")),
            "--model", str(tiny_model),
            "--algo", algo,
            "--max-steps", "2",
            *batch,
            "--batch-size", "2",
            "--max-completion-length", "8",
            "--learning-rate", "1e-3",
            "--grader", "rank_grader:score",
            "--output-dir", str(tmp_path / "out"),
            "--cpu",
        ],
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    summaries = [line for line in proc.stdout.splitlines() if line.startswith(f"{algo}: ")]
    assert len(summaries) == 1, proc.stdout  # only the main process prints
    assert f"{algo}: 2 steps on 2 processes on {ROWS} prompts" in summaries[0]
    log = json.loads((tmp_path / "out" / "pacore_train.json").read_text())
    assert (log["processes"], log["rank_steps"], log["steps"]) == (2, [2, 2], 2)
    # each rank generated and rewarded completions, of different problems
    seen = {
        rank: set((graded / f"rank-{rank}").read_text().split())
        for rank in ("0", "1")
        if (graded / f"rank-{rank}").is_file()
    }
    assert sorted(seen) == ["0", "1"] and not (graded / "rank-none").exists()
    assert seen["0"] and seen["1"] and not seen["0"] & seen["1"], seen
    before, after = load_weights(tiny_model), load_weights(tmp_path / "out")
    assert before.keys() == after.keys()  # the policy alone, not the DDP wrapper or the critic
    assert not before[LAYER_WEIGHT].equal(after[LAYER_WEIGHT])


def test_accelerate_cpu_launch_that_starts_one_process_is_refused(
    tiny_model: Path, tmp_path: Path
) -> None:
    proc = accelerate(
        "--cpu", "--num_processes", "2",
        train=[
            "--dataset", str(write_trainset(tmp_path / "trainset.jsonl")),
            "--model", str(tiny_model),
            "--output-dir", str(tmp_path / "out"),
        ],
        cwd=tmp_path,
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("pacore: error:")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-3000:]
    assert "starts one process" in errors[0] and "--multi_gpu --num_processes N" in errors[0]
    assert not (tmp_path / "out").exists()  # refused before anything loaded or was written


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, Processes(0, 1)),
        ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, Processes(1, 2)),
        ({"PMI_RANK": "3", "PMI_SIZE": "4"}, Processes(3, 4)),
        ({"ACCELERATE_USE_CPU": "True"}, Processes(0, 1)),  # accelerate launch --cpu, alone
        (
            {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "PMI_SIZE": "2"},
            Processes(0, 2),  # the same under mpirun, accelerate's multi-CPU path
        ),
    ],
)
def test_processes_from_the_launchers_variables(
    env: Mapping[str, str], expected: Processes
) -> None:
    assert check_launch(env) == current_processes(env) == expected
    assert expected.is_main == (expected.rank == 0)


def test_one_cpu_process_where_several_were_asked_is_a_launch_error() -> None:
    env = {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    with pytest.raises(LaunchError, match="starts one process"):
        check_launch(env)
