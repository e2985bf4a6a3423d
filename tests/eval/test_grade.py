"""eval/grade: a Grade's score is checked, and every built-in grader is a Grader."""

from __future__ import annotations

import pytest
from graders_support import ALL_GRADERS

from pacore_graph.eval import (
    CallableGrader,
    Grade,
    Grader,
)


def test_grade_validates_its_score() -> None:
    assert Grade(1, True).score == 1.0 and isinstance(Grade(1, True).score, float)
    for bad in (-0.1, 1.5, float("nan"), "1"):
        with pytest.raises(ValueError, match=r"in \[0, 1\]"):
            Grade(bad, True)  # type: ignore[arg-type]


def test_builtins_satisfy_the_protocol() -> None:
    for grader in [*ALL_GRADERS, CallableGrader(lambda r, g: True)]:
        assert isinstance(grader, Grader)
