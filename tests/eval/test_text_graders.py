"""eval/text_graders: the exact, numeric and choice graders."""

from __future__ import annotations

import pytest
from graders_support import BIG, BIG_PLUS_ONE, score

from pacore_graph.eval import (
    ChoiceGrader,
    ExactGrader,
    NumericGrader,
)


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("Some work.\nThe answer is:\n  Box   B. ", "box b", 1.0),
        (r"\boxed{\text{Box B}}", "Box B", 1.0),
        ("Answer: Box B", "Box B", 1.0),
        (r"Not \boxed{Box A} but \boxed{Box B}", "Box B", 1.0),
        (r"<think>\boxed{Box B}</think>Box C", "Box B", 0.0),
        ("Box C", "Box B", 0.0),
        ("Box B is likely", "Box B", 0.0),
    ],
)
def test_exact(response: str, truth: str, expected: float) -> None:
    assert score(ExactGrader(), response, truth) == expected


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("It goes up 20 meters", "20", 1.0),
        ("It goes up 20 meters", "20 meters", 1.0),
        ("area = 32 cm^2", "32 cm²", 1.0),
        ("a = 9.8 m/s^2", "9.8", 1.0),
        (r"\boxed{1,234}", "1234", 1.0),
        ("about 1,234,567.5 units", "1234567.5", 1.0),
        (r"\boxed{-7}", "-7", 1.0),
        (r"\boxed{-7}", "7", 0.0),
        ("so x = −7", "-7", 1.0),
        ("pages 3-4", "4", 1.0),
        ("so x = 3/4", "0.75", 1.0),
        (r"\boxed{\frac{3}{4}}", "0.75", 1.0),
        (r"\boxed{-\dfrac{3}{4}}", "-3/4", 1.0),
        ("0.3333333", "1/3", 1.0),  # within 1e-6
        ("0.3333", "1/3", 0.0),
        ("1.5e3", "1500", 1.0),
        (f"it is {BIG}", BIG_PLUS_ONE, 0.0),  # integers: exact, no tolerance
        (f"it is {BIG}", BIG, 1.0),
        (r"First 5050, then \boxed{5049}", "5050", 0.0),
        (r"<think>5050</think>Final: 5049", "5050", 0.0),
    ],
)
def test_numeric(response: str, truth: str, expected: float) -> None:
    assert score(NumericGrader(), response, truth) == expected


def test_numeric_tolerance_is_configurable() -> None:
    assert score(NumericGrader(rel_tol=1e-3), "0.3333", "1/3") == 1.0
    with pytest.raises(ValueError, match="rel_tol"):
        NumericGrader(rel_tol=-1)


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        (r"\boxed{B}", "B", 1.0),
        (r"\boxed{(B)}", "b", 1.0),
        (r"\boxed{\text{B}}", "(B)", 1.0),
        (r"\boxed{B) 42}", "B", 1.0),
        ("The answer is (C).", "C", 1.0),
        ("the answer is (c)", "C", 1.0),
        ("Answer: D", "D", 1.0),
        ("I think A.\nFinal answer: **J**", "J", 1.0),
        ("Reasoning...\n\n(E)", "E", 1.0),
        ("Reasoning...\nE", "E", 1.0),
        (r"\boxed{B}", "C", 0.0),
        (r"\boxed{A} then \boxed{C}", "A", 0.0),
        (r"<think>\boxed{A}</think>The answer is B.", "A", 0.0),
        ("the answer is a prime", "A", 0.0),  # lower-case "a" is a word here
        ("K", "K", 0.0),  # outside A-J
    ],
)
def test_choice(response: str, truth: str, expected: float) -> None:
    assert score(ChoiceGrader(), response, truth) == expected
