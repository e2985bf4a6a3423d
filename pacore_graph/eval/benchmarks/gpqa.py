r"""GPQA Diamond (``Idavidrein/gpqa``, ``gpqa_diamond``): four choices, shuffled per question.

The hub layout (split ``train``, 198 rows; gated: accept the terms and log in,
or use ``gpqa-diamond:PATH``): ``Question``, ``Correct Answer``,
``Incorrect Answer 1`` .. ``Incorrect Answer 3``, ``Record ID``, plus
domain columns. The correct answer is always the first of the four in the
data, so the choices must be shuffled. simple-evals shuffles with one
``random.Random(0)`` over the whole set and lighteval draws the gold index at
random; both make a question's letters depend on which other questions were
loaded. Here each question's order comes from its own ``Record ID`` (a
SHA-256 seed), so ``--limit`` or a filtered copy never reletters a question.
The prompt asks for the letter in ``\boxed{}``, the answer every grader and
majority vote of this package reads; the ``choice`` grader also accepts
simple-evals' "Answer: X" line.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pacore_graph.eval.benchmarks.base import Benchmark, HubDataset, Skip, cell_text

__all__ = ["GPQA_DIAMOND", "GPQABenchmark", "shuffled_choices"]

LETTERS = "ABCD"
_INSTRUCTION = (
    "Answer the following multiple choice question. Think step by step before answering, "
    "and put the letter of your final choice (one of ABCD) in \\boxed{}."
)


def shuffled_choices(record_id: str, correct: str, wrong: list[str]) -> tuple[list[str], str]:
    """The four choices in this question's own order, and the correct letter."""
    choices = [correct, *wrong]
    seed = int.from_bytes(hashlib.sha256(record_id.encode("utf-8")).digest()[:8], "big")
    random.Random(seed).shuffle(choices)
    return choices, LETTERS[choices.index(correct)]


@dataclass(frozen=True, slots=True)
class GPQABenchmark(Benchmark):
    """One multiple-choice record per question, graded by its letter."""

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        record_id = cell_text(row, "Record ID").strip()
        question = cell_text(row, "Question").strip()
        correct = cell_text(row, "Correct Answer").strip()
        wrong = [cell_text(row, f"Incorrect Answer {i}").strip() for i in (1, 2, 3)]
        choices, letter = shuffled_choices(record_id, correct, wrong)
        options = "\n".join(f"{LETTERS[i]}) {text}" for i, text in enumerate(choices))
        return {
            "id": record_id,
            "messages": [{"role": "user", "content": f"{_INSTRUCTION}\n\n{question}\n\n{options}"}],
            "ground_truth": {"answer": letter},
            "category": "choice",
            "domain": row.get("High-level domain"),
        }


GPQA_DIAMOND = GPQABenchmark(
    name="gpqa-diamond",
    description="GPQA Diamond, 198 questions (Idavidrein/gpqa, config gpqa_diamond, gated)",
    hub=HubDataset("Idavidrein/gpqa", config="gpqa_diamond", split="train"),
    columns=(
        "Question",
        "Correct Answer",
        "Incorrect Answer 1",
        "Incorrect Answer 2",
        "Incorrect Answer 3",
        "Record ID",
    ),
    optional_columns=("High-level domain",),
)
