"""Is a program's output right? LiveCodeBench's comparison rules, restated.

Source: ``lcb_runner/evaluation/testing_util.py`` of LiveCodeBench/LiveCodeBench
(``get_stripped_lines``, ``convert_line_to_decimals``, the output checks of
``grade_stdio`` and ``grade_call_based``). Restated, not copied, and kept
apart from running the code so each rule has its own test.

**stdin/stdout tests** (:func:`stdout_matches`): both texts are stripped,
split on ``"\\n"`` and each line stripped; the line counts must agree; each
pair of lines must be equal as text, or else both be whitespace-separated
lists of numbers that are equal as :class:`~decimal.Decimal` (``1.0`` and
``1.00`` agree, ``5e-1`` and ``0.5`` agree; no tolerance beyond exact
decimal value, which is LiveCodeBench's rule too).

**functional tests** (:func:`value_matches`): the returned value, with a
top-level tuple read as a list (a model returning ``(1, 2)`` is not
penalised against the JSON ``[1, 2]``), must be ``==`` to the expected
output's JSON value. Python's ``==`` makes ``1 == 1.0 == True``; so does
LiveCodeBench.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["stdout_matches", "stdout_mismatch", "stripped_lines", "value_matches"]


def stripped_lines(text: str) -> list[str]:
    """``text`` stripped, split on newlines, each line stripped (LiveCodeBench's rule)."""
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(item) for item in line.split()]
    except (InvalidOperation, ValueError):
        return None


def stdout_mismatch(actual: str, expected: str) -> str | None:
    """Why ``actual`` is not ``expected`` under LiveCodeBench's rules, or None when it is.

    The reason names the first differing line (1-based) so a report can show
    it; both sides are clipped to keep a huge output out of the record.
    """
    got, want = stripped_lines(actual), stripped_lines(expected)
    if len(got) != len(want):
        return f"{len(got)} output lines, expected {len(want)}"
    for number, (a, b) in enumerate(zip(got, want, strict=True), start=1):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is not None and db is not None and da == db:
            continue
        return f"line {number}: {_clip(a)!r} != {_clip(b)!r}"
    return None


def stdout_matches(actual: str, expected: str) -> bool:
    """Whether ``actual`` passes a stdin/stdout test whose answer is ``expected``."""
    return stdout_mismatch(actual, expected) is None


def value_matches(actual: Any, expected: Any) -> bool:
    """Whether a functional test's returned value equals the expected JSON value."""
    if isinstance(actual, tuple):
        actual = list(actual)
    try:
        return bool(actual == expected)
    except Exception:  # a value whose __eq__ raises is not equal
        return False


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
