"""``pacore train --algo ppo``: TRL's PPOTrainer with a critic and the PaCoRe reward, on CPU.

The policy is the tiny random-weight Llama with SmolLM2's real tokenizer, whose
pad token is its end token ``<|im_end|>``: the case in which TRL's pad masking
used to hide the prompt from the reward lookup (``StopIteration``). Its
completions are noise, so the reward is shaped (a hash of the message) for the
training run; the default reward is checked on hand-made sequences.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import pytest
from rl_support import LAYER_WEIGHT, PROBLEMS, load_weights, make_run_results

from pacore_graph.cli import main
from pacore_graph.rl.export import export_episodes
from pacore_graph.rl.rewards import PaCoReReward, encode_ground_truth
from pacore_graph.rl.train import TrainSettings, load_config_file, trainer_config

CALLS: list[Any] = []


def shaped_score(response: str, ground_truth: Any) -> float:
    """A score spread over [0, 1] by a hash of the message (imported by ``--grader``)."""
    CALLS.append(ground_truth)
    return (zlib.crc32(response.encode()) % 1000) / 999


def test_prompt_index_finds_prompts_whose_pad_is_their_end_token(tiny_model: Path) -> None:
    import torch
    from transformers import AutoTokenizer

    from pacore_graph.rl.ppo import PromptIndex, make_reward_model, prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    assert tok.pad_token_id == tok.eos_token_id  # SmolLM2: pad is <|im_end|>
    prepare_tokenizer(tok)
    assert tok.pad_token_id != tok.eos_token_id and tok.padding_side == "left"
    prompt = [{"role": "user", "content": "What is 54 - 6?"}]
    ids = tok.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    assert tok.eos_token_id in ids  # the prompt itself holds <|im_end|>
    index = PromptIndex(pad_id=tok.pad_token_id)
    row = {"prompt": prompt, "ground_truth": encode_ground_truth({"answer": "48"})}
    index.add(ids, row)
    model = make_reward_model(tok, index, PaCoReReward(grader="math"))
    answers = ["The answer is \\boxed{48}.", "So the original 54-6 is it.", "\\boxed{47}"]
    width = len(ids) + 16
    rows = []
    for text in answers:
        seq = ids + tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        seq = [0] * 2 + seq  # left padding, zeroed as TRL's get_reward does
        rows.append(seq + [0] * (width + 2 - len(seq)))
    out = model.backbone(input_ids=torch.tensor(rows))
    scores = model.score(out.hidden_states[-1])[:, -1, 0].tolist()
    assert scores == [1.0, 0.0, 0.0]
    with pytest.raises(LookupError, match="no known prompt"):
        model.backbone(input_ids=torch.tensor([[5, 6, 7]]))


def test_ppo_config_has_the_papers_settings_and_reads_a_config_file(tmp_path: Path) -> None:
    config_file = tmp_path / "ppo.yaml"
    config_file.write_text("vf_coef: 0.5\ncliprange: 0.1\n", encoding="utf-8")
    settings = TrainSettings(
        algo="ppo", max_steps=3, per_device_train_batch_size=2, kl_coef=0.02,
        overrides=load_config_file(config_file), use_cpu=True,
    )  # fmt: skip
    cfg = trainer_config(settings, tmp_path / "out")
    assert type(cfg).__name__ == "PPOConfig"
    assert (cfg.gamma, cfg.lam, cfg.temperature, cfg.num_ppo_epochs) == (1.0, 1.0, 1.0, 1)
    assert (cfg.kl_coef, cfg.vf_coef, cfg.cliprange) == (0.02, 0.5, 0.1)
    assert cfg.total_episodes == 6
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"vf_coeff": 1}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"PPOConfig has no field.*vf_coeff"):
        trainer_config(TrainSettings(algo="ppo", overrides=load_config_file(bad)), tmp_path / "o")
    grpo = trainer_config(TrainSettings(use_cpu=True), tmp_path / "g")
    assert grpo.scale_rewards == "none" and grpo.report_to == []


async def test_ppo_trains_through_the_cli(
    tiny_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    results, _client = await make_run_results(tmp_path)
    export_episodes(results, tmp_path / "episodes", "hf")
    config_file = tmp_path / "ppo.json"
    config_file.write_text(json.dumps({"vf_coef": 0.5, "logging_steps": 1}), encoding="utf-8")
    CALLS.clear()
    code = main(
        [
            "train",
            "--dataset", str(tmp_path / "episodes"),
            "--model", str(tiny_model),
            "--algo", "ppo",
            "--max-steps", "2",
            "--batch-size", "2",
            "--max-completion-length", "8",
            "--learning-rate", "1e-3",
            "--grader", "test_ppo:shaped_score",
            "--config", str(config_file),
            "--output-dir", str(tmp_path / "ppo"),
            "--cpu",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ppo: 2 steps" in out
    # the reward model graded every completion against the row's decoded ground truth
    assert len(CALLS) >= 4 and all(isinstance(t, dict) and "answer" in t for t in CALLS)
    log = json.loads((tmp_path / "ppo" / "pacore_train.json").read_text())
    assert (log["algo"], log["steps"]) == ("ppo", 2)
    logged = [h for h in log["log_history"] if "loss/policy_avg" in h]
    assert len(logged) == 2 and len(PROBLEMS) >= 2
    for entry in logged:
        for key in ("loss/policy_avg", "loss/value_avg", "objective/kl", "objective/scores"):
            assert math.isfinite(entry[key]), (key, entry)
        assert 0 <= entry["objective/scores"] <= 1
    before, after = load_weights(tiny_model), load_weights(tmp_path / "ppo")
    assert not before[LAYER_WEIGHT].equal(after[LAYER_WEIGHT])  # the policy moved
