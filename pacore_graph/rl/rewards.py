"""The reward TRL calls: compact the completion, grade the message, return the score.

The paper's reward is sparse and terminal: the *compacted message* of a
trajectory, verified against the ground truth, in [0, 1]. Training therefore
scores exactly what the next round (or the user) would read, with the same
compactor and grader as a run, so a reward of 1 during training means the
same thing as a correct answer in ``pacore eval``.

Ground truth travels through datasets as JSON text (:func:`encode_ground_truth`)
because records hold anything from ``"42"`` to ``{"answer": ..., "tests": [...]}``
and a Parquet/Arrow column needs one type for every row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.eval.graders import (
    Grade,
    Grader,
    auto_grader,
    grade_response,
    grader_from_name,
)
from pacore_graph.values.answers import problem_text
from pacore_graph.values.compaction import Compactor, ConclusionCompactor, compactor_from_name
from pacore_graph.values.records import Trajectory

__all__ = [
    "PaCoReReward",
    "completion_trajectory",
    "decode_ground_truth",
    "encode_ground_truth",
]

#: Keys under which chat templates' response parsers return the reasoning.
_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")


def encode_ground_truth(ground_truth: Any) -> str:
    """Ground truth as JSON text, the one column type every dataset format accepts."""
    return json.dumps(ground_truth, ensure_ascii=False, sort_keys=True)


def decode_ground_truth(value: Any) -> Any:
    """Inverse of :func:`encode_ground_truth`, lenient with hand-made datasets.

    A string that is not JSON is a plain answer (``"x + 1"``) and is returned
    as it is; a string that is JSON is decoded (``"42"`` becomes 42, which
    every grader reads as the answer 42). Anything else is already decoded.
    """
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def completion_trajectory(completion: Any) -> Trajectory:
    """A TRL completion as the :class:`Trajectory` a compactor expects.

    TRL passes a string for plain-text prompts and a list of messages for
    conversational ones; when the tokenizer has a response parser (Qwen3 and
    other reasoning templates), the assistant message carries the thinking
    in ``reasoning_content`` and ``content`` already is the conclusion, as
    with a vLLM reasoning parser at inference time.
    """
    if isinstance(completion, str):
        return Trajectory(round=0, index=0, content=completion)
    if isinstance(completion, Mapping):
        messages: Sequence[Any] = [completion]
    elif isinstance(completion, Sequence):
        messages = completion
    else:
        raise TypeError(
            f"a completion is a string or a list of chat messages, got {type(completion).__name__}"
        )
    assistant = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant"]
    if not assistant:
        return Trajectory(round=0, index=0, content="")
    last = assistant[-1]
    content = last.get("content")
    if isinstance(content, list):  # content blocks
        content = "".join(
            b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
    reasoning = next(
        (last[k] for k in _REASONING_KEYS if isinstance(last.get(k), str) and last.get(k)), None
    )
    return Trajectory(round=0, index=0, content=content or "", reasoning=reasoning)


def _per_row(value: Any, n: int, name: str) -> list[Any]:
    if value is None:
        return [None] * n
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"reward function: {name} must be a list with one value per completion")
    if len(value) != n:
        raise ValueError(
            f"reward function: got {n} completions but {len(value)} {name} values; "
            "TRL passes one per completion"
        )
    return list(value)


@dataclass(frozen=True, slots=True)
class PaCoReReward:
    """TRL reward function: ``reward(prompts, completions, ground_truth, **kwargs)``.

    Each completion is compacted with ``compactor`` (the paper's
    ``conclusion`` by default) and the message graded against the row's
    ``ground_truth`` column with ``grader``, or, when ``grader`` is None,
    with the grader for the row's ``category`` column (math unless it names
    another). A row without a ground truth gets ``None``, which TRL reads as
    "this reward does not apply" rather than as a wrong answer.

    It is a callable object rather than a closure so that it pickles (TRL
    and ``accelerate`` may send reward functions to other processes); names
    such as ``"conclusion"`` or ``"math"`` are resolved once, when it is made.
    """

    compactor: Compactor | str = field(default_factory=ConclusionCompactor)
    grader: Grader | str | None = None
    _compactor: Compactor = field(init=False, repr=False, compare=False)
    _grader: Grader | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compactor = self.compactor
        grader = self.grader
        object.__setattr__(
            self,
            "_compactor",
            compactor_from_name(compactor) if isinstance(compactor, str) else compactor,
        )
        object.__setattr__(
            self, "_grader", grader_from_name(grader) if isinstance(grader, str) else grader
        )

    @property
    def __name__(self) -> str:  # TRL names its reward metrics after this
        return "pacore_reward"

    def message(self, completion: Any) -> str:
        """The compacted message of one completion: what gets graded."""
        return self._compactor.compact(completion_trajectory(completion))

    def grade(
        self,
        completion: Any,
        ground_truth: Any,
        category: str | None = None,
        prompt: Any = None,
    ) -> Grade:
        """Grade one completion; ``ground_truth`` may be JSON text or a decoded value.

        ``prompt`` (text or chat messages) lets the grader tell a completion
        that restates the problem's expression from one that answers it.
        """
        grader = self._grader if self._grader is not None else auto_grader(category)
        return grade_response(
            grader,
            self.message(completion),
            decode_ground_truth(ground_truth),
            problem_text(prompt),
        )

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        ground_truth: Sequence[Any] | None = None,
        category: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        if completions is None:
            raise TypeError("reward function: TRL passes completions=[...]; none were given")
        n = len(completions)
        truths = _per_row(ground_truth, n, "ground_truth")
        categories = _per_row(category, n, "category")
        # Prompts only help (restatements); a caller that passes none, or not one
        # per completion, is graded without them rather than refused.
        fits = isinstance(prompts, Sequence) and not isinstance(prompts, str)
        prompt_rows = list(prompts) if fits and len(prompts) == n else [None] * n  # type: ignore[arg-type]
        rewards: list[float | None] = []
        extracted: list[str | None] = []
        for completion, truth, cat, prompt in zip(
            completions, truths, categories, prompt_rows, strict=True
        ):
            decoded = decode_ground_truth(truth)
            if decoded is None:
                rewards.append(None)
                extracted.append(None)
                continue
            grade = self.grade(completion, decoded, cat if isinstance(cat, str) else None, prompt)
            rewards.append(grade.score)
            extracted.append(grade.extracted)
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):  # TRL >= 1.x: adds a column to the completions table
            log_extra("pacore_extracted", extracted)
        return rewards
