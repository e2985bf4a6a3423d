"""code_compare: LiveCodeBench's output rules (testing_util.py), each with a case that fails."""

from __future__ import annotations

import pytest

from pacore_graph.eval.code_compare import (
    stdout_matches,
    stdout_mismatch,
    stripped_lines,
    value_matches,
)


def test_stripped_lines_strip_the_whole_text_then_each_line() -> None:
    assert stripped_lines("  1 2 \n 3\n\n") == ["1 2", "3"]


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ("3\n", "3"),
        ("  3  \n\n\n", "3\n"),
        ("1 2\n3\n", "1 2 \n 3"),
        ("0.50\n", "0.5"),  # equal as decimals
        ("5e-1 2\n", "0.5 2.0"),
        ("Yes\nNo", "Yes\r\nNo"),  # \r is stripped with the line
    ],
)
def test_outputs_that_pass(actual: str, expected: str) -> None:
    assert stdout_matches(actual, expected)


@pytest.mark.parametrize(
    ("actual", "expected", "reason"),
    [
        ("3\n4\n", "3", "2 output lines, expected 1"),
        ("yes", "Yes", "line 1"),  # case matters
        ("0.3333", "0.333333", "line 1"),  # no tolerance: exact decimal value
        ("1  2", "1 3", "line 1"),
        ("50000000000000001", "50000000000000000", "line 1"),
        ("", "0", "line 1"),
    ],
)
def test_outputs_that_fail_say_where(actual: str, expected: str, reason: str) -> None:
    why = stdout_mismatch(actual, expected)
    assert why is not None and reason in why


def test_functional_values() -> None:
    assert value_matches((1, 2), [1, 2])  # a top-level tuple is read as a list
    assert value_matches(1.0, 1)
    assert not value_matches([1, 2], [2, 1])
    assert not value_matches([(1, 2)], [[1, 2]])  # only the top level, as LiveCodeBench
    assert not value_matches("1", 1)
