"""What the grader tests share: numbers too big for floats, the built-in graders, a score."""

from __future__ import annotations

from typing import Any

from pacore_graph.eval import (
    ChoiceGrader,
    ExactGrader,
    Grader,
    MathGrader,
    NumericGrader,
)

BIG = "123456789012345678901234567"
BIG_PLUS_ONE = "123456789012345678901234568"


def score(grader: Grader, response: str, truth: Any) -> float:
    return grader.grade(response, truth).score


ALL_GRADERS: list[Grader] = [MathGrader(), ExactGrader(), NumericGrader(), ChoiceGrader()]
