r"""What a grader returns and promises: a :class:`Grade`, never an exception.

Every grader is one method, ``grade(response, ground_truth, problem=None) ->
Grade``, and every grader keeps one promise: **it never raises**. An
evaluation runs thousands of responses from models that write anything; a
response that cannot be read is a wrong answer (score 0, ``parsed=False``,
the reason in ``detail``), never a crashed run. Programming errors still
surface: they land in ``detail`` of every grade, where a report shows them.

``problem`` is the question's text. Built-in graders use it to recognise a
response that restates the question instead of answering it (see
:mod:`pacore_graph.values.answers`); :func:`grade_response` passes it to graders
that take it and leaves it out for a user's grader that does not.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from pacore_graph.errors import PaCoReError
from pacore_graph.values.answers import extract_boxed

__all__ = [
    "MAX_DETAIL_CHARS",
    "TEXT_WRAPPER",
    "Grade",
    "Grader",
    "GradingTimeoutError",
    "caret_powers",
    "describe_error",
    "grade_response",
    "ground_truth_answer",
    "guarded",
    "last_line",
    "no_ground_truth",
    "normalize_text",
]

MAX_DETAIL_CHARS = 500


MAX_DETAIL_CHARS = 500


@dataclass(frozen=True, slots=True)
class Grade:
    """The outcome of grading one response.

    ``parsed`` says whether an answer could be read from the response at all:
    reports count unparsed responses apart from wrong ones, because a model
    that never states an answer needs a different fix than one that states
    the wrong answer. ``extracted`` is the answer the grader read and
    ``expected`` the ground truth it compared against, both as text.
    """

    score: float
    parsed: bool
    extracted: str | None = None
    expected: str | None = None
    detail: str = ""
    info: Mapping[str, Any] | None = None
    """Grader-specific facts a report keeps (JSON values): tests passed, judge tokens, ..."""

    def __post_init__(self) -> None:
        score = self.score
        if not isinstance(score, int | float) or not math.isfinite(score) or not 0 <= score <= 1:
            raise ValueError(f"a grade's score must be a number in [0, 1], got {score!r}")
        object.__setattr__(self, "score", float(score))


@runtime_checkable
class Grader(Protocol):
    """Scores one response against one ground truth; never raises."""

    @property
    def name(self) -> str:
        """Short name used in reports and on the command line."""
        ...

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade: ...


class GradingTimeoutError(PaCoReError):
    """Verification took longer than the grader's ``timeout_s``."""


# --------------------------------------------------------------------------- ground truth


def ground_truth_answer(gt: Any) -> str | None:
    """The ground truth as answer text, or None when the record has none.

    Datasets in the public pipeline's format carry ``{"answer": "..."}``;
    hand-made ones often a bare string or number. Integers stay exact (a
    26-digit answer must not go through a float) and floats are written
    without exponent notation, which answer parsers read as something else.
    """
    if isinstance(gt, dict):
        if "answer" not in gt:
            return None
        gt = gt["answer"]
    if gt is None:
        return None
    if isinstance(gt, str):
        text = gt.strip()
        return text or None
    if isinstance(gt, bool):
        return str(gt)
    if isinstance(gt, int | Fraction):
        return str(gt)
    if isinstance(gt, float | Decimal):
        if isinstance(gt, float) and not math.isfinite(gt):
            return str(gt)
        text = format(Decimal(repr(gt)) if isinstance(gt, float) else gt, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    return None


# --------------------------------------------------------------------------- shared helpers


def describe_error(exc: BaseException) -> str:
    """``Type: message`` for a grade's detail; never raises, never huge."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # str() of some sympy objects raises
        text = type(exc).__name__
    return text[:MAX_DETAIL_CHARS]


def guarded(
    grader_name: str, grade: Callable[[str, Any], Grade], response: Any, ground_truth: Any
) -> Grade:
    """Run a grader's logic so that any error becomes a score-0, unparsed grade."""
    try:
        if not isinstance(response, str):
            raise TypeError(f"response must be a string, got {type(response).__name__}")
        return grade(response, ground_truth)
    except Exception as exc:
        try:
            expected = ground_truth_answer(ground_truth)
        except Exception:
            expected = None
        return Grade(
            score=0.0,
            parsed=False,
            expected=expected,
            detail=f"{grader_name} grader error: {describe_error(exc)}",
        )


def no_ground_truth(extracted: str | None) -> Grade:
    return Grade(
        score=0.0,
        parsed=extracted is not None,
        extracted=extracted,
        detail="the record has no ground-truth answer to compare against",
    )


def last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


TEXT_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)
_ANSWER_LABEL = re.compile(
    r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is\s*:?|:)\s*", flags=re.IGNORECASE
)
_SUPERSCRIPT_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+")
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


def caret_powers(text: str) -> str:
    """``cm²`` -> ``cm^{2}``: models write Unicode superscripts that LaTeX parsers do not read."""
    return _SUPERSCRIPT_RUN.sub(
        lambda m: "^{" + m.group(0).translate(_SUPERSCRIPT_DIGITS) + "}", text
    )


def normalize_text(text: str) -> str:
    """Case-, space- and markup-insensitive form of an answer, for text equality.

    Strips surrounding ``$``, ``**`` and a trailing period, unwraps
    ``\\text{..}``-style wrappers and an ``Answer:`` label, collapses
    whitespace and case-folds.
    """
    text = text.strip()
    boxed = extract_boxed(text)
    if boxed:
        text = boxed[-1]
    for _ in range(3):  # nested wrappers such as \text{\textbf{B}}
        text = TEXT_WRAPPER.sub(r"\1", text)
    text = " ".join(text.split())
    text = _ANSWER_LABEL.sub("", text)
    text = text.strip().strip("*").strip()
    if len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text.strip("$").strip()
    text = text.rstrip(".").strip()
    return text.casefold()


@lru_cache(maxsize=256)
def _takes_problem(kind: type) -> bool:
    try:
        params = inspect.signature(kind.grade).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError):
        return False
    return "problem" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def grade_response(
    grader: Grader, response: str, ground_truth: Any, problem: str | None = None
) -> Grade:
    """``grader.grade(...)`` with the problem when the grader takes one.

    Graders written before ``problem`` existed (``grade(response,
    ground_truth)``) keep working; they just cannot tell a restatement.
    """
    if problem is not None and _takes_problem(type(grader)):
        return grader.grade(response, ground_truth, problem=problem)
    return grader.grade(response, ground_truth)
