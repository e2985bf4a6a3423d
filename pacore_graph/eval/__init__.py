"""Evaluation: graders that score answers, and the datasets to score them on.

Graders (:mod:`pacore_graph.eval.graders`) share one protocol and never raise;
datasets (:mod:`pacore_graph.eval.datasets`) are JSONL in the ``pacore run``
format, generated reproducibly from a seed or shipped with the package.
"""

from __future__ import annotations

from pacore_graph.eval.datasets import (
    ARITHMETIC_OPS,
    DATASET_KINDS,
    DEFAULT_MODULUS,
    EASY_ARITHMETIC_OPS,
    arithmetic_problems,
    easy_arithmetic_problems,
    generate_dataset,
    load_jsonl,
    sample_questions_path,
    write_jsonl,
)
from pacore_graph.eval.graders import (
    CallableGrader,
    ChoiceGrader,
    ExactGrader,
    Grade,
    Grader,
    GradingTimeoutError,
    MathGrader,
    NumericGrader,
    auto_grader,
    grader_from_name,
    ground_truth_answer,
)

__all__ = [
    "ARITHMETIC_OPS",
    "DATASET_KINDS",
    "DEFAULT_MODULUS",
    "EASY_ARITHMETIC_OPS",
    "CallableGrader",
    "ChoiceGrader",
    "ExactGrader",
    "Grade",
    "Grader",
    "GradingTimeoutError",
    "MathGrader",
    "NumericGrader",
    "arithmetic_problems",
    "auto_grader",
    "easy_arithmetic_problems",
    "generate_dataset",
    "grader_from_name",
    "ground_truth_answer",
    "load_jsonl",
    "sample_questions_path",
    "write_jsonl",
]
