"""Graders: never raising whatever they are given, and the name registry."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from graders_support import ALL_GRADERS, BIG

from pacore_graph.eval import (
    CallableGrader,
    ChoiceGrader,
    ExactGrader,
    Grader,
    MathGrader,
    NumericGrader,
    auto_grader,
    grader_from_name,
    ground_truth_answer,
)

# --------------------------------------------------------------------------- never raise


@pytest.mark.parametrize("grader", ALL_GRADERS, ids=lambda g: g.name)
@pytest.mark.parametrize("response", ["", "   \n  ", "I don't know.", r"\boxed{}", "<think>"])
def test_unparseable_responses_score_zero_unparsed(grader: Grader, response: str) -> None:
    truth = "B" if grader.name == "choice" else "42"
    grade = grader.grade(response, {"answer": truth})
    if grader.name == "exact" and response.strip() not in ("", r"\boxed{}"):
        # The exact grader reads any last line as the answer: parsed, but wrong.
        assert (grade.score, grade.parsed) == (0.0, True)
    else:
        assert (grade.score, grade.parsed, grade.extracted) == (0.0, False, None)
    assert grade.expected == truth


@pytest.mark.parametrize("grader", ALL_GRADERS, ids=lambda g: g.name)
@pytest.mark.parametrize("response", [None, 42, b"\\boxed{42}", ["42"]])
def test_non_string_responses_do_not_raise(grader: Grader, response: Any) -> None:
    grade = grader.grade(response, "42")
    assert (grade.score, grade.parsed) == (0.0, False)
    assert "must be a string" in grade.detail


def test_bad_ground_truths_do_not_raise() -> None:
    assert "not a choice letter" in ChoiceGrader().grade(r"\boxed{B}", "forty-two").detail
    assert "contains no number" in NumericGrader().grade(r"\boxed{4}", "four").detail
    for grader in ALL_GRADERS:
        assert grader.grade(r"\boxed{4}", object()).score == 0.0


# --------------------------------------------------------------------------- registry


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = "pacore_test_user_grading"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from pacore_graph.eval import ExactGrader

            def contains(response, ground_truth):
                return ground_truth["answer"] in response

            class Scorers:
                @staticmethod
                def half(response, ground_truth):
                    return 0.5

            READY = ExactGrader(name="my-exact")
            NOT_CALLABLE = 42
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_grader_from_name_builtins() -> None:
    assert isinstance(grader_from_name("math"), MathGrader)
    assert isinstance(grader_from_name(" exact "), ExactGrader)
    assert isinstance(grader_from_name("numeric"), NumericGrader)
    assert isinstance(grader_from_name("choice"), ChoiceGrader)


def test_grader_from_name_loads_user_callables(user_module: str) -> None:
    grader = grader_from_name(f"{user_module}:contains")
    assert isinstance(grader, CallableGrader)
    assert grader.name == f"{user_module}:contains"
    assert grader.grade("it is 42", {"answer": "42"}).score == 1.0
    assert grader_from_name(f"{user_module}:Scorers.half").grade("x", "y").score == 0.5
    ready = grader_from_name(f"{user_module}:READY")
    assert isinstance(ready, ExactGrader) and ready.name == "my-exact"


def test_grader_from_name_errors(user_module: str) -> None:
    with pytest.raises(ValueError, match="unknown grader 'bogus'; choose math, exact"):
        grader_from_name("bogus")
    with pytest.raises(ValueError, match="expected module:function"):
        grader_from_name(f"{user_module}:")
    with pytest.raises(ImportError, match="cannot import module 'no_such_module_xyz'"):
        grader_from_name("no_such_module_xyz:score")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        grader_from_name(f"{user_module}:missing")
    with pytest.raises(TypeError, match="is a int, not a function"):
        grader_from_name(f"{user_module}:NOT_CALLABLE")


def test_auto_grader_defaults_to_math() -> None:
    assert isinstance(auto_grader(None), MathGrader)
    assert isinstance(auto_grader("math"), MathGrader)
    assert isinstance(auto_grader("physics"), MathGrader)
    assert isinstance(auto_grader("Multiple_Choice"), ChoiceGrader)
    assert isinstance(auto_grader("mcq"), ChoiceGrader)
    assert isinstance(auto_grader("exact"), ExactGrader)
    assert isinstance(auto_grader("numeric"), NumericGrader)


def test_ground_truth_answer_normalises_formats() -> None:
    assert ground_truth_answer({"answer": "32 cm²"}) == "32 cm²"
    assert ground_truth_answer({"answer": 5050}) == "5050"
    assert ground_truth_answer("  Box B \n") == "Box B"
    assert ground_truth_answer(int(BIG)) == BIG
    assert ground_truth_answer(0.5) == "0.5"
    assert ground_truth_answer(1e-7) == "0.0000001"  # never "1e-07"
    assert ground_truth_answer(20.0) == "20"
    assert ground_truth_answer(-7) == "-7"
    for missing in (None, "", "   ", {}, {"solution": "x"}, {"answer": None}, [1, 2]):
        assert ground_truth_answer(missing) is None
