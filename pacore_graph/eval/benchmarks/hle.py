"""Humanity's Last Exam (``cais/hle``), text-only questions, judged against the answer.

The hub layout (split ``test``; the dataset is gated: accept its terms on the
hub and log in, or use ``hle:PATH`` on a local copy): ``id``, ``question``,
``image`` (a data URI, ``""`` when the question has none), ``answer``,
``answer_type`` (``exactMatch`` or ``multipleChoice``; the official harness,
hle_eval/run_model_predictions.py in github.com/centerforaisafety/hle, spells
them ``exact_match``/``multiple_choice``), ``category``, ``raw_subject``,
``rationale``, ``author_name``.

Image questions are skipped and counted (PaCoRe's model is text-only, as the
paper's "HLE text" column). The prompt is the official one: a system message
asking for ``Explanation:``/``Exact Answer:`` (or ``Answer:``)/``Confidence:``,
chosen by the answer type, and the question as the user message; the official
harness compares against ``'exact_match'`` only, so with the hub's spelling it
always sends the multiple-choice wording: we read both spellings and send the
wording the answer type asks for. Grading is an LLM judge with HLE's rubric
(``ground_truth["rubric"] == "hle"``): the answer is free text, often an
expression or a name, which no string match grades fairly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pacore_graph.eval.benchmarks.base import Benchmark, HubDataset, Skip, cell_text

__all__ = ["HLE", "HLE_SYSTEM_EXACT", "HLE_SYSTEM_MC", "HLEBenchmark"]

HLE_SYSTEM_EXACT = (
    "Your response should be in the following format:\n"
    "Explanation: {your explanation for your final answer}\n"
    "Exact Answer: {your succinct, final answer}\n"
    "Confidence: {your confidence score between 0% and 100% for your answer}"
)
HLE_SYSTEM_MC = (
    "Your response should be in the following format:\n"
    "Explanation: {your explanation for your answer choice}\n"
    "Answer: {your chosen answer}\n"
    "Confidence: {your confidence score between 0% and 100% for your answer}"
)

_EXACT = {"exactmatch", "exact_match"}
_MC = {"multiplechoice", "multiple_choice"}


@dataclass(frozen=True, slots=True)
class HLEBenchmark(Benchmark):
    """One record per text question; image questions are :class:`Skip`."""

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        image = row.get("image")
        if image not in (None, ""):
            return Skip("image question")
        question_id = cell_text(row, "id").strip()
        question = cell_text(row, "question")
        answer = cell_text(row, "answer")
        answer_type = cell_text(row, "answer_type").strip()
        kind = answer_type.lower()
        if kind not in _EXACT | _MC:
            raise ValueError(
                f"column 'answer_type' is {answer_type!r}; expected exactMatch or multipleChoice"
            )
        system = HLE_SYSTEM_EXACT if kind in _EXACT else HLE_SYSTEM_MC
        return {
            "id": question_id,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ],
            "ground_truth": {"answer": answer.strip(), "answer_type": answer_type, "rubric": "hle"},
            "category": "judge",
            "subject": row.get("raw_subject"),
            "hle_category": row.get("category"),
        }


HLE = HLEBenchmark(
    name="hle",
    description="Humanity's Last Exam, text-only questions (cais/hle, gated)",
    hub=HubDataset("cais/hle", split="test"),
    columns=("id", "question", "answer", "answer_type"),
    optional_columns=("image", "category", "raw_subject"),
)
