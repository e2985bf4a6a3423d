"""PPO as the paper trains: TRL's ``PPOTrainer`` with a critic and the PaCoRe reward.

The paper optimises each round as an episode with strict on-policy PPO and
GAE (lambda = gamma = 1), sampling at temperature 1.0. TRL 1.0-1.12 ship
that trainer as ``trl.experimental.ppo.PPOTrainer`` (TRL 1.13 removed it),
which is why the ``[rl]`` extra pins ``trl<1.13``. It needs three models
besides the policy:

- a **value model** (the critic): the same checkpoint loaded as a
  sequence-classification model with one output, so it has the ``score``
  head TRL reads values from;
- a **reference model**: a frozen copy of the policy that TRL makes itself;
- a **reward model**: TRL calls it on the token ids of prompt + completion
  and reads a scalar per sequence. :func:`make_reward_model` wraps the same
  :class:`~pacore_graph.rl.rewards.PaCoReReward` GRPO uses (compact, then
  grade against the row's ground truth) in the ``nn.Module`` shape TRL
  expects: the prompt is found by its token ids, the completion decoded.

Tokenizers whose pad token is their end token (SmolLM2: ``<|im_end|>``) get
a distinct pad token here: TRL masks every pad id, and the prompt's own
``<|im_end|>`` tokens would otherwise vanish from the policy's inputs and
from the reward model's lookup (which then found no prompt and stopped with
``StopIteration``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pacore_graph.rl import require_rl
from pacore_graph.rl.rewards import PaCoReReward

__all__ = ["PromptIndex", "build_ppo_trainer", "make_reward_model", "prepare_tokenizer"]

_PPO_DEPS = ("torch", "transformers", "trl", "datasets", "accelerate")
#: Pad tokens to try, in order, when the tokenizer pads with its end token.
_SPARE_PADS = ("<|endoftext|>", "<pad>", "<|pad|>", "<unk>")


def prepare_tokenizer(tokenizer: Any) -> Any:
    """Left padding (TRL generates from the right end) and a pad token that is not EOS."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        vocab = tokenizer.get_vocab()
        spare = next((t for t in _SPARE_PADS if t in vocab and t != tokenizer.eos_token), None)
        if spare is None:
            tokenizer.add_special_tokens({"pad_token": "<|pacore_pad|>"})
        else:
            tokenizer.pad_token = spare
    return tokenizer


@dataclass(slots=True)
class PromptIndex:
    """Rendered prompt token ids -> the row they came from (ground truth, category, prompt)."""

    pad_id: int
    rows: dict[tuple[int, ...], Mapping[str, Any]] = field(default_factory=dict)
    lengths: set[int] = field(default_factory=set)

    def add(self, ids: Sequence[int], row: Mapping[str, Any]) -> None:
        key = tuple(int(i) for i in ids)
        if self.pad_id in key:
            raise ValueError(
                "a rendered prompt contains the pad token; the tokenizer needs a pad token "
                "that never occurs in text (see prepare_tokenizer)"
            )
        self.rows[key] = row
        self.lengths.add(len(key))

    def split(self, ids: Sequence[int]) -> tuple[Mapping[str, Any], list[int]]:
        """(the row, the completion's ids) for one padded prompt + completion sequence.

        TRL hands the reward model ids whose pad positions are zeroed, so
        both the pad id and 0 count as padding at either end.
        """
        pads = {self.pad_id, 0}
        values = [int(i) for i in ids]
        start = 0
        while start < len(values) and values[start] in pads:
            start += 1
        body = values[start:]
        for length in sorted(self.lengths, reverse=True):
            row = self.rows.get(tuple(body[:length]))
            if row is not None:
                completion = body[length:]
                while completion and completion[-1] in pads:
                    completion.pop()
                return row, completion
        raise LookupError(
            "PPO reward: a sequence starts with no known prompt (was the dataset tokenized "
            "with another tokenizer or chat template?)"
        )


def make_reward_model(tokenizer: Any, index: PromptIndex, reward: PaCoReReward) -> Any:
    """An ``nn.Module`` TRL's ``get_reward`` can call: ``backbone`` + ``score``.

    TRL reads ``getattr(model, model.base_model_prefix)(input_ids=...,
    ...).hidden_states[-1]`` and passes it through ``model.score``; the
    reward is taken at each sequence's last token. The backbone here puts
    each sequence's PaCoRe reward at every position, and ``score`` is the
    identity.
    """
    require_rl("torch")
    import torch
    from torch import nn

    class _Output:
        def __init__(self, hidden: torch.Tensor) -> None:
            self.hidden_states = (hidden,)

    class _Grader(nn.Module):
        def forward(self, input_ids: torch.Tensor, **_: Any) -> _Output:
            scores = []
            for ids in input_ids.tolist():
                row, completion = index.split(ids)
                text = tokenizer.decode(completion, skip_special_tokens=True)
                grade = reward.grade(
                    text, row.get("ground_truth"), row.get("category"), row.get("prompt")
                )
                scores.append(grade.score)
            per_seq = torch.tensor(scores, dtype=torch.float32, device=input_ids.device)
            return _Output(per_seq[:, None, None].expand(-1, input_ids.shape[1], 1))

    class PaCoReRewardModel(nn.Module):
        base_model_prefix = "backbone"

        def __init__(self) -> None:
            super().__init__()
            self.backbone = _Grader()
            self.score = nn.Identity()

    return PaCoReRewardModel()


def _tokenized(dataset: Any, tokenizer: Any, index: PromptIndex) -> Any:
    from datasets import Dataset

    rows = []
    for row in dataset:
        prompt = row["prompt"]
        if isinstance(prompt, str):
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        else:
            ids = tokenizer.apply_chat_template(
                list(prompt), add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, Mapping) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        index.add(ids, row)
        rows.append({"input_ids": list(ids)})
    return Dataset.from_list(rows)


@functools.cache
def _trainer_class() -> Any:
    """TRL's ``PPOTrainer`` made to save its policy when it runs on several processes.

    Under ``accelerate launch`` / ``torchrun`` the trainer's model is wrapped
    (``DistributedDataParallel``), so TRL 1.12's ``save_model`` no longer
    finds ``.policy`` on it and hands the whole wrapper, critic included, to
    safetensors, which refuses its shared tensors; the rank that does not
    save reads ``is_distributed_loading_by_transformers``, which transformers
    5.24's ``Trainer.__init__`` sets and TRL's does not call. Unwrapping
    first and giving the attribute its default fixes both; one process
    behaves as before.
    """
    from trl.experimental.ppo import PPOTrainer

    class PaCoRePPOTrainer(PPOTrainer):
        is_distributed_loading_by_transformers = False

        def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
            wrapped = self.model
            self.model = self.accelerator.unwrap_model(wrapped)
            try:
                super().save_model(output_dir, _internal_call)
            finally:
                self.model = wrapped

    return PaCoRePPOTrainer


def build_ppo_trainer(
    dataset: Any,
    model: str | Path,
    config: Any,
    reward: PaCoReReward,
    *,
    processing_class: Any = None,
    callbacks: Sequence[Any] | None = None,
) -> Any:
    """A ready TRL ``PPOTrainer`` (not started) on the prompts of ``dataset``.

    ``model`` is a folder (or hub name) loaded twice: as the causal-LM policy
    and as the one-output value model; ``config`` a ``PPOConfig``.
    """
    require_rl(*_PPO_DEPS)
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    tokenizer = processing_class or AutoTokenizer.from_pretrained(str(model))
    prepare_tokenizer(tokenizer)
    policy = AutoModelForCausalLM.from_pretrained(str(model))
    value = AutoModelForSequenceClassification.from_pretrained(str(model), num_labels=1)
    if len(tokenizer) > int(policy.config.vocab_size):
        policy.resize_token_embeddings(len(tokenizer))
        value.resize_token_embeddings(len(tokenizer))
    for m in (policy, value):
        m.config.pad_token_id = tokenizer.pad_token_id
    policy.generation_config.pad_token_id = tokenizer.pad_token_id
    index = PromptIndex(pad_id=int(tokenizer.pad_token_id))
    train_dataset = _tokenized(dataset, tokenizer, index)
    return _trainer_class()(
        args=config,
        processing_class=tokenizer,
        model=policy,
        ref_model=None,
        reward_model=make_reward_model(tokenizer, index, reward),
        train_dataset=train_dataset,
        value_model=value,
        callbacks=list(callbacks) if callbacks else None,
    )
