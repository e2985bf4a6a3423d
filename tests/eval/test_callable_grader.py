"""eval/callable_grader: a user's function as a grader, its failures scored zero."""

from __future__ import annotations

from typing import Any

import pytest

from pacore_graph.eval import (
    CallableGrader,
    Grade,
)


def test_callable_grader_accepts_bool_float_and_grade() -> None:
    as_bool = CallableGrader(lambda response, truth: response.strip() == truth["answer"])
    assert as_bool.grade("42", {"answer": "42"}) == Grade(1.0, True, None, "42")
    assert as_bool.grade("41", {"answer": "42"}).score == 0.0

    as_float = CallableGrader(lambda response, truth: 0.25, name="quarter")
    assert (as_float.name, as_float.grade("x", "y").score) == ("quarter", 0.25)

    custom = Grade(0.5, True, "x", "y", "partial credit")
    assert CallableGrader(lambda response, truth: custom).grade("x", "y") is custom


def test_callable_grader_failures_score_zero() -> None:
    def boom(response: str, truth: Any) -> float:
        raise RuntimeError("test harness exploded")

    grade = CallableGrader(boom).grade("x", {"answer": "1"})
    assert (grade.score, grade.parsed, grade.expected) == (0.0, False, "1")
    assert "RuntimeError: test harness exploded" in grade.detail
    assert CallableGrader(boom).name.endswith("boom")

    too_big = CallableGrader(lambda response, truth: 1.5).grade("x", "1")
    assert too_big.score == 0.0 and "[0, 1]" in too_big.detail
    wrong_type = CallableGrader(lambda response, truth: "yes").grade("x", "1")  # type: ignore[arg-type,return-value]
    assert wrong_type.score == 0.0 and "must return a bool" in wrong_type.detail
    with pytest.raises(TypeError, match="needs a callable"):
        CallableGrader(42)  # type: ignore[arg-type]
