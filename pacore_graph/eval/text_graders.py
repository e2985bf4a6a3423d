r"""Graders that read answers as text: exact strings, numbers, choice letters.

All read the answer :mod:`pacore_graph.values.answers` finds (boxed, stated, then
their own documented fallback), so they agree with the ``answer`` compactor
and with majority voting on what a response answered.

- ``exact``: normalised string equality.
- ``numeric``: the last number, exact for integers, relative tolerance else.
- ``choice``: a multiple-choice letter A-J.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

from pacore_graph.eval.grade import (
    TEXT_WRAPPER,
    Grade,
    caret_powers,
    ground_truth_answer,
    guarded,
    last_line,
    no_ground_truth,
    normalize_text,
)
from pacore_graph.values.answers import (
    extract_answer,
    extract_boxed,
    split_conclusion,
    stated_answer_present,
    without_restatements,
)

__all__ = ["ChoiceGrader", "ExactGrader", "NumericGrader"]


@dataclass(frozen=True, slots=True)
class ExactGrader:
    r"""Normalised string equality with the answer: boxed, stated, else the last line.

    The answer is :func:`~pacore_graph.values.answers.extract_answer`'s with the
    ``line`` fallback.

    Normalisation ignores case, surrounding whitespace, repeated spaces, a
    trailing period, ``$``/``**`` around the answer, ``\text{}``-style
    wrappers and an ``Answer:`` label, and nothing else: use it for answers
    that are names or phrases, where "close" is wrong.
    """

    name: str = "exact"

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        return guarded(self.name, partial(self._grade, problem=problem), response, ground_truth)

    def _grade(self, response: str, ground_truth: Any, problem: str | None) -> Grade:
        answer = extract_answer(response, problem=problem, fallback="line")
        extracted = answer.text if answer is not None else None
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return no_ground_truth(extracted)
        if extracted is None:
            return Grade(0.0, False, None, expected, "the response states no answer")
        ok = normalize_text(extracted) == normalize_text(expected)
        return Grade(1.0 if ok else 0.0, True, extracted, expected)


# A number not glued to a word or another number, and not an exponent or a
# subscript (the 2 of "cm^2" is a unit's, not the answer's).
_NUM_START = r"(?<![\w.])(?<!\^)(?<!\^\{)(?<!_\{)(?<!\*\*)"
_SIGN = r"(?P<sign>[-−+]\s?)?"
_NUMBER_RE = re.compile(
    _NUM_START
    + _SIGN
    + r"(?:"
    + r"\\[dt]?frac\s*\{\s*(?P<fnum>-?\d+(?:\.\d+)?)\s*\}\s*\{\s*(?P<fden>\d+(?:\.\d+)?)\s*\}"
    + r"|(?P<num>\d+(?:\.\d+)?)\s*/\s*(?P<den>\d+(?:\.\d+)?)(?![\d.])"
    + r"|(?P<thousands>\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?![\d])"
    + r"|(?P<plain>(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)"
    + r")"
)
_LATEX_THOUSANDS = re.compile(r"(?<=\d)(?:\{,\}|\\,)(?=\d{3})")


def _last_number(text: str) -> tuple[Fraction, str] | None:
    """The last number in ``text`` as an exact fraction, with the text it came from."""
    text = _LATEX_THOUSANDS.sub(",", caret_powers(text))
    last: re.Match[str] | None = None
    for last in _NUMBER_RE.finditer(text):  # noqa: B007 - only the last match is kept
        pass
    if last is None:
        return None
    groups = last.groupdict()
    if groups["fnum"] is not None:
        value = Fraction(groups["fnum"]) / Fraction(groups["fden"])
    elif groups["num"] is not None:
        value = Fraction(groups["num"]) / Fraction(groups["den"])
    elif groups["thousands"] is not None:
        value = Fraction(groups["thousands"].replace(",", ""))
    else:
        value = Fraction(groups["plain"])
    if groups["sign"] and groups["sign"].strip() in "-−":
        value = -value
    return value, last.group(0).strip()


@dataclass(frozen=True, slots=True)
class NumericGrader:
    r"""The last number of the answer: boxed or stated, else of the conclusion.

    Numbers of an expression copied from the problem ("the original 54-6
    is ..." for "What is 54 - 6?") are not read: a restated question is no
    answer.

    Reads negatives, decimals, ``1,234`` thousands separators, ``3/4`` and
    ``\frac{3}{4}``; units and words around the number are ignored ("20
    meters" is 20). Two integers must be equal exactly, because a
    relative tolerance would accept an off-by-one 26-digit product; anything
    else is equal within ``rel_tol``.
    """

    name: str = "numeric"
    rel_tol: float = 1e-6

    def __post_init__(self) -> None:
        if not math.isfinite(self.rel_tol) or self.rel_tol < 0:
            raise ValueError(f"rel_tol must be a finite number >= 0, got {self.rel_tol!r}")

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        return guarded(self.name, partial(self._grade, problem=problem), response, ground_truth)

    def _grade(self, response: str, ground_truth: Any, problem: str | None) -> Grade:
        answer = extract_answer(response, problem=problem, fallback="none")
        if answer is not None:
            found = _last_number(answer.text)
        elif stated_answer_present(response):
            found = None  # an empty box, junk or a restatement: no answer
        else:
            found = _last_number(without_restatements(split_conclusion(response), problem))
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return no_ground_truth(found[1] if found else None)
        if found is None:
            return Grade(0.0, False, None, expected, "no number in the response's answer")
        want = _last_number(expected)
        if want is None:
            raise ValueError(f"the ground truth {expected!r} contains no number")
        got_value, got_text = found
        ok = self._equal(got_value, want[0])
        return Grade(1.0 if ok else 0.0, True, got_text, expected)

    def _equal(self, got: Fraction, want: Fraction) -> bool:
        if got.denominator == 1 and want.denominator == 1:
            return got == want
        scale = max(abs(got), abs(want))
        return abs(got - want) <= Fraction(self.rel_tol) * scale


_CHOICE_BOXED = re.compile(r"^\(?\s*([A-Ja-j])\s*\)?(?:[.):\s]|$)")
_CHOICE_STATED = re.compile(
    r"(?i:answer)\s*(?i:is|:)?\s*(?i:option\s*|choice\s*)?[:\s]*\**\s*"
    r"(?:\(([A-Ja-j])\)|([A-J])\b)"
)
_CHOICE_LONE = re.compile(r"^[\s*_(\[]*([A-J])[\s*_)\].]*$")
_CHOICE_TRUTH = re.compile(r"^\(?\s*([A-Ja-j])\s*\)?(?:[.):\s]|$)")


def _choice_letter(conclusion: str) -> str | None:
    r"""The chosen letter: last ``\boxed{}``, else the last "answer is (B)", else a lone letter."""
    boxed = extract_boxed(conclusion)
    if boxed:
        inner = boxed[-1]
        for _ in range(3):
            inner = TEXT_WRAPPER.sub(r"\1", inner)
        match = _CHOICE_BOXED.match(inner.strip())
        return match.group(1).upper() if match else None
    stated = list(_CHOICE_STATED.finditer(conclusion))
    if stated:
        last = stated[-1]
        return (last.group(1) or last.group(2)).upper()
    line = last_line(conclusion)
    if line is not None:
        match = _CHOICE_LONE.match(line)
        if match:
            return match.group(1)
    return None


@dataclass(frozen=True, slots=True)
class ChoiceGrader:
    r"""Multiple choice, letters A-J.

    Reads, in order of trust: the last ``\boxed{B}`` (also ``\boxed{(B)}``,
    ``\boxed{\text{B}}``), the last "answer is (B)" / "Answer: B", and a
    final line that is just the letter. Lower-case letters count only in
    parentheses or in a box, so "the answer is a prime" is not choice A.
    """

    name: str = "choice"

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        return guarded(self.name, self._grade, response, ground_truth)

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        letter = _choice_letter(split_conclusion(response))
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return no_ground_truth(letter)
        truth = _CHOICE_TRUTH.match(normalize_text(expected).upper())
        if truth is None:
            raise ValueError(f"the ground truth {expected!r} is not a choice letter A-J")
        if letter is None:
            return Grade(0.0, False, None, expected, "no choice letter in the response")
        ok = letter == truth.group(1).upper()
        return Grade(1.0 if ok else 0.0, True, letter, expected)
