"""eval/answer_size: answers too big to build are recognised from their text, before sympy.

A huge power or factorial is one C call holding the GIL, which no timeout can
stop, so these checks must answer from the text alone; every case here is
also a value the math grader would otherwise try to build.
"""

from __future__ import annotations

import re

import pytest

from pacore_graph.eval.answer_size import cost_problem, number_before_unit

LIMIT = 1000


@pytest.mark.parametrize(
    "text", ["42", "2^{10}", "10^{1000}", "100000!", "(3+4)!", r"\frac{1}{2}", "x^2 + 1"]
)
def test_values_small_enough_to_build_have_no_problem(text: str) -> None:
    assert cost_problem(text, LIMIT) is None


def test_a_text_over_the_limit_is_refused_by_its_length() -> None:
    assert cost_problem("1" * (LIMIT + 1), LIMIT) == (
        f"the answer is {LIMIT + 1} characters long (limit {LIMIT})"
    )
    assert cost_problem("1" * LIMIT, LIMIT) is None


@pytest.mark.parametrize("text", ["10^{10^{10}}", "2^3^4", "2**3**4"])
def test_power_towers_are_refused(text: str) -> None:
    assert cost_problem(text, LIMIT) == "the answer is a power tower"


@pytest.mark.parametrize(
    ("text", "digits"), [("10^{2000000}", 2_000_001), ("2**4000000", 1_204_120)]
)
def test_a_power_with_millions_of_digits_is_refused_with_an_estimate_not_below_its_size(
    text: str, digits: int
) -> None:
    problem = cost_problem(text, LIMIT)
    assert problem is not None
    found = re.fullmatch(r"the answer has a power with about (\d+) digits", problem)
    assert found is not None and int(found.group(1)) >= digits


def test_a_factorial_of_a_large_literal_or_expression_is_refused() -> None:
    assert cost_problem("100001!", LIMIT) == "the answer has the factorial of 100001"
    assert cost_problem("100,001 !", LIMIT) == "the answer has the factorial of 100,001"
    for text in ("(2^{10})!", "(100001+1)!", "{3 + 200000}!"):
        assert cost_problem(text, LIMIT) == "the answer has the factorial of a large expression"


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("32 cm^2", "32"),
        ("20 m/s^2", "20"),
        ("4.5 kg", "4.5"),
        ("1,000 kg", "1,000"),
        ("−7 km", "-7"),  # a typeset minus sign reads as a minus
        (r"5 \text{m}", "5"),
    ],
)
def test_the_number_before_a_unit(text: str, number: str) -> None:
    assert number_before_unit(text) == number


@pytest.mark.parametrize("text", ["12", "3 x", "hello", "", "x 3 cm"])
def test_no_number_when_the_rest_is_not_a_unit(text: str) -> None:
    assert number_before_unit(text) is None
