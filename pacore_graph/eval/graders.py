r"""Graders: score a response against a problem's ground truth, in [0, 1].

Every grader is one method, ``grade(response, ground_truth) -> Grade``, and
every grader keeps one promise: **it never raises**. An evaluation runs
thousands of responses from models that write anything; a response that
cannot be read is a wrong answer (score 0, ``parsed=False``, the reason in
``detail``), never a crashed run. Programming errors still surface: they land
in ``detail`` of every grade, where a report shows them.

All built-ins grade the *conclusion* of a response (everything after the last
``</think>``, see :func:`~pacore_graph.compaction.split_conclusion`): a
boxed answer the model wrote while thinking and then revised does not count.

- ``math``: answer equivalence with math-verify (LaTeX and numeric).
- ``exact``: normalised string equality.
- ``numeric``: the last number, exact for integers, relative tolerance else.
- ``choice``: a multiple-choice letter A-J.
- ``module:function``: a user's callable returning a bool, a float or a Grade.

math-verify and threads (math-verify 0.9.0, read from its source and probed):
``parse`` and ``verify`` bound their work with ``signal.alarm``. That only
works in the main thread: from any other thread (``asyncio.to_thread``, a
thread pool, a LangGraph sync node) both raise ``ValueError("... doesn't
support threaded environment ...")``, whatever ``raise_on_error`` says. In the
main thread it works, also inside ``asyncio.run``, but it takes over the
process's SIGALRM handler and cancels any alarm the host program had set, and
its granularity is whole seconds. :class:`MathGrader` therefore always turns
it off (``parsing_timeout=None``, ``timeout_seconds=None``, and filters out
the warning math-verify logs about that) and bounds the work itself:

1. A size guard keeps sympy away from answers whose exact value is huge
   (power towers such as ``10^{10^{10}}``, powers or factorials with millions
   of digits, answers over ``max_answer_chars``): such answers are compared as
   normalised text instead. This is the guard that matters. Building a huge
   integer is one C call that holds the GIL: no thread-based timeout can
   interrupt it, and while it runs no other thread of the process runs
   either. (math-verify's alarm does stop it, because CPython's big-integer
   loops check for signals, but only in the main thread.)
2. The remaining work, pure-Python sympy, runs in a daemon thread with a
   deadline (``timeout_s``). When it is over time the grade is 0 with a
   timeout detail, and the thread is asked to stop with an asynchronous
   exception, which Python delivers at its next bytecode.

``grade`` is synchronous and may take up to ``timeout_s``: in async code call
it through ``asyncio.to_thread``, which is safe for every built-in.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import logging
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Protocol, TypeVar, runtime_checkable

from pacore_graph.compaction import extract_boxed, split_conclusion

__all__ = [
    "CallableGrader",
    "ChoiceGrader",
    "ExactGrader",
    "Grade",
    "Grader",
    "GradingTimeoutError",
    "MathGrader",
    "NumericGrader",
    "auto_grader",
    "grader_from_name",
    "ground_truth_answer",
]

_T = TypeVar("_T")

_MAX_DETAIL_CHARS = 500


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

    def grade(self, response: str, ground_truth: Any) -> Grade: ...


class GradingTimeoutError(RuntimeError):
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


def _describe(exc: BaseException) -> str:
    """``Type: message`` for a grade's detail; never raises, never huge."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # str() of some sympy objects raises
        text = type(exc).__name__
    return text[:_MAX_DETAIL_CHARS]


def _guarded(
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
            detail=f"{grader_name} grader error: {_describe(exc)}",
        )


def _no_ground_truth(extracted: str | None) -> Grade:
    return Grade(
        score=0.0,
        parsed=extracted is not None,
        extracted=extracted,
        detail="the record has no ground-truth answer to compare against",
    )


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


_TEXT_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)
_ANSWER_LABEL = re.compile(
    r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is\s*:?|:)\s*", flags=re.IGNORECASE
)
_SUPERSCRIPT_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+")
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


def _caret_powers(text: str) -> str:
    """``cm²`` -> ``cm^{2}``: models write Unicode superscripts that LaTeX parsers do not read."""
    return _SUPERSCRIPT_RUN.sub(
        lambda m: "^{" + m.group(0).translate(_SUPERSCRIPT_DIGITS) + "}", text
    )


def _normalize_text(text: str) -> str:
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
        text = _TEXT_WRAPPER.sub(r"\1", text)
    text = " ".join(text.split())
    text = _ANSWER_LABEL.sub("", text)
    text = text.strip().strip("*").strip()
    if len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text.strip("$").strip()
    text = text.rstrip(".").strip()
    return text.casefold()


def _boxed_or_last_line(conclusion: str) -> str | None:
    boxed = extract_boxed(conclusion)
    if boxed:
        return boxed[-1] or None  # an empty \boxed{} states no answer
    return _last_line(conclusion)


# --------------------------------------------------------------------------- exact


@dataclass(frozen=True, slots=True)
class ExactGrader:
    r"""Normalised string equality: the last ``\boxed{}``, else the last line.

    Normalisation ignores case, surrounding whitespace, repeated spaces, a
    trailing period, ``$``/``**`` around the answer, ``\text{}``-style
    wrappers and an ``Answer:`` label, and nothing else: use it for answers
    that are names or phrases, where "close" is wrong.
    """

    name: str = "exact"

    def grade(self, response: str, ground_truth: Any) -> Grade:
        return _guarded(self.name, self._grade, response, ground_truth)

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        extracted = _boxed_or_last_line(split_conclusion(response))
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return _no_ground_truth(extracted)
        if extracted is None:
            return Grade(0.0, False, None, expected, "the response's conclusion is empty")
        ok = _normalize_text(extracted) == _normalize_text(expected)
        return Grade(1.0 if ok else 0.0, True, extracted, expected)


# --------------------------------------------------------------------------- numeric

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
    text = _LATEX_THOUSANDS.sub(",", _caret_powers(text))
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
    r"""The last number of the answer (the last ``\boxed{}``, else the conclusion).

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

    def grade(self, response: str, ground_truth: Any) -> Grade:
        return _guarded(self.name, self._grade, response, ground_truth)

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        conclusion = split_conclusion(response)
        boxed = extract_boxed(conclusion)
        found = _last_number(boxed[-1] if boxed else conclusion)
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return _no_ground_truth(found[1] if found else None)
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


# --------------------------------------------------------------------------- choice

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
            inner = _TEXT_WRAPPER.sub(r"\1", inner)
        match = _CHOICE_BOXED.match(inner.strip())
        return match.group(1).upper() if match else None
    stated = list(_CHOICE_STATED.finditer(conclusion))
    if stated:
        last = stated[-1]
        return (last.group(1) or last.group(2)).upper()
    line = _last_line(conclusion)
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

    def grade(self, response: str, ground_truth: Any) -> Grade:
        return _guarded(self.name, self._grade, response, ground_truth)

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        letter = _choice_letter(split_conclusion(response))
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return _no_ground_truth(letter)
        truth = _CHOICE_TRUTH.match(_normalize_text(expected).upper())
        if truth is None:
            raise ValueError(f"the ground truth {expected!r} is not a choice letter A-J")
        if letter is None:
            return Grade(0.0, False, None, expected, "no choice letter in the response")
        ok = letter == truth.group(1).upper()
        return Grade(1.0 if ok else 0.0, True, letter, expected)


# --------------------------------------------------------------------------- math

_MAX_POWER_DIGITS = 10**6  # about 0.2 s to build; 10^7 digits already takes seconds
_MAX_FACTORIAL = 10**5
_POWER_OP = re.compile(r"\^|\*\*")
_INT_LITERAL = re.compile(r"\d[\d,]*")
_FACTORIAL_OF_INT = re.compile(r"(\d[\d,]*)\s*!")
_EXPONENT_TOKEN = re.compile(r"[-+]?\s*\d[\d,.]*|\\[A-Za-z]+|.")
_CLOSERS = {")": "(", "}": "{", "]": "["}
_OPENERS = {"(": ")", "{": "}", "[": "]"}


def _int_value(literal: str) -> int:
    digits = literal.replace(",", "")
    # Only the size matters here; avoid building (or str-limiting) huge ints.
    return int(digits) if len(digits) <= 18 else 10**18


def _group_forward(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``start`` (or the text's end)."""
    close, depth = _OPENERS[text[start]], 0
    for i in range(start, len(text)):
        if text[i] == text[start]:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _group_backward(text: str, end: int) -> int:
    """Index of the bracket opening the group that closes at ``end``."""
    opener, depth = _CLOSERS[text[end]], 0
    for i in range(end, -1, -1):
        if text[i] == text[end]:
            depth += 1
        elif text[i] == opener:
            depth -= 1
            if depth == 0:
                return i
    return 0


def _exponent_span(text: str, start: int) -> tuple[int, int]:
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    if i < len(text) and text[i] in _OPENERS:
        return i, _group_forward(text, i)
    match = _EXPONENT_TOKEN.match(text, i)
    return i, match.end() if match else i


def _power_cost(text: str, memo: dict[str, int | None] | None = None) -> int | None:
    """Rough digit count of the largest integer power in ``text``; None for a tower.

    A bracketed base counts with its own powers, so ``(10^{100})^{100000}``
    is 200 * 100000 digits. ``memo`` keeps deeply nested brackets from being
    rescanned exponentially often.
    """
    memo = {} if memo is None else memo
    if text not in memo:
        memo[text] = _scan_powers(text, memo)
    return memo[text]


def _scan_powers(text: str, memo: dict[str, int | None]) -> int | None:
    worst = 0
    for op in _POWER_OP.finditer(text):
        exp_start, exp_end = _exponent_span(text, op.end())
        exponent = text[exp_start:exp_end]
        if _POWER_OP.search(exponent) or "!" in exponent or "uparrow" in exponent:
            return None
        if _POWER_OP.match(text[exp_end:].lstrip()):
            return None  # a^b^c written without braces: a tower too
        exp_value = max((_int_value(m) for m in _INT_LITERAL.findall(exponent)), default=1)
        base_end = op.start() - 1
        while base_end >= 0 and text[base_end].isspace():
            base_end -= 1
        if base_end >= 0 and text[base_end] in _CLOSERS:
            base = text[_group_backward(text, base_end) : base_end + 1]
            inner = _power_cost(base[1:-1], memo)
            if inner is None:
                return None
            literals = (len(m.replace(",", "")) for m in _INT_LITERAL.findall(base))
            base_digits = max(inner, *literals, 1)
        else:
            run = re.search(r"[\d,.]*$", text[: base_end + 1])
            base_digits = max(len((run.group(0) if run else "").replace(",", "")), 1)
        worst = max(worst, base_digits * exp_value)
        if worst > _MAX_POWER_DIGITS:
            break
    return worst


def _cost_problem(text: str, max_chars: int) -> str | None:
    """Why sympy must not evaluate ``text`` exactly (a huge value), or None if it may."""
    if len(text) > max_chars:
        return f"the answer is {len(text)} characters long (limit {max_chars})"
    cost = _power_cost(text)
    if cost is None:
        return "the answer is a power tower"
    if cost > _MAX_POWER_DIGITS:
        return f"the answer has a power with about {cost} digits"
    for literal in _FACTORIAL_OF_INT.findall(text):
        if _int_value(literal) > _MAX_FACTORIAL:
            return f"the answer has the factorial of {literal}"
    for closer in re.finditer(r"[)}\]]\s*!", text):
        group = text[_group_backward(text, closer.start()) : closer.start() + 1]
        big = any(_int_value(m) > _MAX_FACTORIAL for m in _INT_LITERAL.findall(group))
        if big or _POWER_OP.search(group):
            return "the answer has the factorial of a large expression"
    return None


_UNIT_ATOM = (
    r"(?:\\(?:text|mathrm|mbox|rm|textrm)\s*\{[^{}]*\}|[A-Za-zµμΩ°]+)"
    r"(?:\s*\^\s*(?:\{\s*-?\d+\s*\}|-?\d))?"
)
_NUMBER_WITH_UNIT = re.compile(
    r"^\s*(?P<number>[-−]?\d[\d,]*(?:\.\d+)?)"
    r"(?:\s+|\s*\\[,;: !]\s*|\s*~\s*|(?=\\(?:text|mathrm|mbox|rm|textrm)\b))"
    rf"(?P<unit>{_UNIT_ATOM}(?:\s*(?:/|\\cdot|\*|\s)\s*{_UNIT_ATOM})*)\s*\.?\s*$"
)


def _number_before_unit(text: str) -> str | None:
    """``32`` for "32 cm^2" or "20 m/s^2"; None when the rest is not unit-like.

    A single bare letter is not taken for a unit ("3 x" is 3x in LaTeX);
    ``\\text{..}``-wrapped units and words of two or more letters are.
    """
    match = _NUMBER_WITH_UNIT.match(_caret_powers(text))
    if match is None:
        return None
    unit = match.group("unit")
    if "\\" not in unit and sum(ch.isalpha() for ch in unit) < 2:
        return None
    return match.group("number").replace("−", "-")


def _has_math(parsed: Sequence[Any]) -> bool:
    return any(not isinstance(item, str) for item in parsed)


def _matched_text(parsed: Sequence[Any], default: str) -> str:
    texts = [item for item in parsed if isinstance(item, str)]
    return texts[-1] if texts else default


def _is_plain_number(parsed: Sequence[Any]) -> bool:
    for item in parsed:
        if isinstance(item, str):
            continue
        symbols = getattr(item, "free_symbols", None)
        is_number = getattr(item, "is_number", False)
        return bool(is_number) and not symbols
    return False


def _interrupt(thread: threading.Thread) -> None:
    """Raise :class:`_Abandoned` in ``thread`` at its next bytecode (CPython C API)."""
    ident = thread.ident
    if ident is None:
        return
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    modified = set_async_exc(ctypes.c_ulong(ident), ctypes.py_object(_Abandoned))
    if modified > 1:  # cannot happen for one live thread id; undo as the C API asks
        set_async_exc(ctypes.c_ulong(ident), None)


class _Abandoned(BaseException):
    """Stops an over-time grading thread; a BaseException so math-verify cannot swallow it."""


def _call_with_deadline(fn: Callable[[], _T], timeout_s: float | None) -> _T:
    """``fn()`` in a daemon thread; :class:`GradingTimeoutError` if it takes over ``timeout_s``.

    The thread is told to stop, but Python cannot stop it inside one long C
    call: keep such calls out with a size guard before calling this.
    """
    if timeout_s is None:
        return fn()
    outcome: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            outcome.append((True, fn()))
        except _Abandoned:
            pass
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="pacore-grader", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        _interrupt(thread)
        raise GradingTimeoutError(
            f"math verification took longer than {timeout_s:g}s and was abandoned; "
            "raise MathGrader(timeout_s=...) if such answers are legitimate"
        )
    ok, value = outcome[0]
    if ok:
        return value
    raise value


class _DisabledTimeoutNotice(logging.Filter):
    """Drops math-verify's "Timeout is disabled ..." warning, which MathGrader makes untrue."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


_QUIET_TIMEOUT_NOTICE = _DisabledTimeoutNotice()


def _require_math_verify() -> None:
    """Import math-verify now (not inside the first deadline), or say how to install it."""
    if importlib.util.find_spec("math_verify") is None:
        raise ImportError(
            "the math grader needs the math-verify package: pip install 'math-verify' "
            "(or choose --grader exact, numeric or choice)"
        )
    importlib.import_module("math_verify")
    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if _QUIET_TIMEOUT_NOTICE not in logger.filters:
            logger.addFilter(_QUIET_TIMEOUT_NOTICE)


@dataclass(frozen=True, slots=True)
class MathGrader:
    r"""Math answer equivalence with math-verify: LaTeX, fractions, numbers, units.

    The response is reduced to its conclusion, then to its last ``\boxed{}``
    (math-verify alone would read several boxed answers as one set), or, when
    nothing is boxed, to its last ``tail_chars`` characters for math-verify's
    own answer extraction. The ground truth is read as LaTeX ("\frac{1}{2}",
    "x^2+5"), or as a number when it is a number with units ("32 cm²",
    "20 meters"). A boxed "32 cm^2" is then read as 32 as well. Answers equal
    as normalised text always count as equal, which is how answers that are
    not math ("Box B") are graded.

    ``timeout_s`` bounds one grade (None: no bound, run in the caller's
    thread); ``max_answer_chars`` and a size guard keep answers whose exact
    value is astronomically large away from sympy (see the module docstring).
    """

    name: str = "math"
    timeout_s: float | None = 10.0
    max_answer_chars: int = 1000
    tail_chars: int = 2000

    def __post_init__(self) -> None:
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {self.timeout_s!r}")
        if self.max_answer_chars < 1 or self.tail_chars < 1:
            raise ValueError("max_answer_chars and tail_chars must be >= 1")
        _require_math_verify()

    def grade(self, response: str, ground_truth: Any) -> Grade:
        return _guarded(self.name, self._grade, response, ground_truth)

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        conclusion = split_conclusion(response)
        boxed = extract_boxed(conclusion)
        candidate = boxed[-1] if boxed else conclusion[-self.tail_chars :]
        expected = ground_truth_answer(ground_truth)
        if expected is None:
            return _no_ground_truth(candidate if candidate.strip() else None)
        if not candidate.strip():
            what = "an empty \\boxed{}" if boxed else "an empty conclusion"
            return Grade(0.0, False, None, expected, f"the response has {what}")
        return _call_with_deadline(
            lambda: self._verify(candidate, bool(boxed), expected), self.timeout_s
        )

    def _verify(self, candidate: str, boxed: bool, expected: str) -> Grade:
        text_equal = _normalize_text(candidate) == _normalize_text(expected)
        problem = _cost_problem(expected, self.max_answer_chars) or _cost_problem(
            candidate, self.max_answer_chars if boxed else self.tail_chars
        )
        if problem is not None:
            shown = candidate if boxed else _last_line(candidate)
            detail = f"compared as text, not evaluated: {problem}"
            return Grade(1.0 if text_equal else 0.0, True, shown, expected, detail)

        mv = importlib.import_module("math_verify")
        gold = self._parse_gold(mv, expected)
        pred = self._parse_response(mv, candidate, boxed, numeric_gold=_is_plain_number(gold))
        if not pred and not text_equal:
            detail = "no answer found in the response's conclusion"
            return Grade(0.0, False, None, expected, detail)
        extracted = candidate.strip() if boxed else _matched_text(pred, candidate.strip())
        if text_equal:
            return Grade(1.0, True, extracted, expected)
        if not gold:
            return Grade(0.0, True, extracted, expected, "ground truth is not math: text compared")
        ok = mv.verify(gold, pred, timeout_seconds=None)
        return Grade(1.0 if ok else 0.0, True, extracted, expected)

    @staticmethod
    def _parse_gold(mv: Any, expected: str) -> list[Any]:
        text = _caret_powers(expected)
        number = _number_before_unit(text)
        if number is not None:
            return list(mv.parse(f"${number}$", parsing_timeout=None))
        inner = text[1:-1] if len(text) > 1 and text[0] == text[-1] == "$" else text
        gold = list(mv.parse(f"${inner}$", parsing_timeout=None))
        if not _has_math(gold):
            plain = list(mv.parse(text, parsing_timeout=None))
            gold = plain if _has_math(plain) else gold
        return gold

    @staticmethod
    def _parse_response(mv: Any, candidate: str, boxed: bool, *, numeric_gold: bool) -> list[Any]:
        if not boxed:
            return list(mv.parse(candidate, parsing_timeout=None))
        text = _caret_powers(candidate)
        number = _number_before_unit(text) if numeric_gold else None
        if number is not None:
            text = number
        pred = list(mv.parse(f"\\boxed{{{text}}}", parsing_timeout=None))
        if not _has_math(pred):
            plain = list(mv.parse(text, parsing_timeout=None))
            pred = plain if _has_math(plain) else pred
        return pred


# --------------------------------------------------------------------------- callables


def _callable_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}:{qualname}" if module else str(qualname)


@dataclass(frozen=True, slots=True)
class CallableGrader:
    """A user's function ``(response, ground_truth) -> bool | float | Grade`` as a grader.

    The function receives the record's ground truth as it is in the dataset
    (``{"answer": ...}`` or whatever the user put there), so it can use
    fields beyond the answer, such as test cases. ``True``/``False`` score
    1/0, a number is the score itself and must be in [0, 1], and a
    :class:`Grade` is passed through. Whatever it raises or returns that is
    none of these becomes a score-0 grade whose detail says why.
    """

    fn: Callable[[str, Any], float | bool | Grade]
    name: str = ""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(
                f"CallableGrader needs a callable (response, ground_truth) -> score, "
                f"got {type(self.fn).__name__}"
            )
        if not self.name:
            object.__setattr__(self, "name", _callable_name(self.fn))

    def grade(self, response: str, ground_truth: Any) -> Grade:
        return _guarded(self.name, self._grade, response, ground_truth)

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        result = self.fn(response, ground_truth)
        if isinstance(result, Grade):
            return result
        expected = ground_truth_answer(ground_truth)
        if isinstance(result, bool):
            return Grade(1.0 if result else 0.0, True, None, expected)
        if isinstance(result, int | float):
            return Grade(float(result), True, None, expected)
        raise TypeError(
            f"{self.name} returned {type(result).__name__}; "
            "a grader function must return a bool, a number in [0, 1] or a Grade"
        )


def _load_callable(spec: str) -> Any:
    module_name, _, attr_path = spec.partition(":")
    if not module_name or not attr_path:
        raise ValueError(f"grader {spec!r}: expected module:function, e.g. mypkg.grading:score")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"grader {spec!r}: cannot import module {module_name!r} ({exc}); "
            "is it installed or on PYTHONPATH?"
        ) from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(
                f"grader {spec!r}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    return obj


# --------------------------------------------------------------------------- registry

_BUILTIN: dict[str, Callable[[], Grader]] = {
    "math": MathGrader,
    "exact": ExactGrader,
    "numeric": NumericGrader,
    "choice": ChoiceGrader,
}

_CATEGORY_GRADERS: dict[str, str] = {
    "choice": "choice",
    "multiple_choice": "choice",
    "multiple-choice": "choice",
    "mcq": "choice",
    "exact": "exact",
    "numeric": "numeric",
}


def grader_from_name(spec: str) -> Grader:
    """Resolve a CLI name: ``math``, ``exact``, ``numeric``, ``choice`` or ``module:function``.

    ``module:function`` may also name a ready grader object (anything with
    ``name`` and ``grade``), which is returned as it is; a plain callable is
    wrapped in :class:`CallableGrader`.
    """
    spec = spec.strip()
    if spec in _BUILTIN:
        return _BUILTIN[spec]()
    if ":" not in spec:
        raise ValueError(
            f"unknown grader {spec!r}; choose {', '.join(_BUILTIN)} or module:function"
        )
    obj = _load_callable(spec)
    if isinstance(obj, Grader) and not isinstance(obj, type):
        return obj
    if not callable(obj):
        raise TypeError(
            f"grader {spec!r} is a {type(obj).__name__}, not a function "
            "(response, ground_truth) -> bool | float | Grade"
        )
    return CallableGrader(obj, name=spec)


def auto_grader(record_category: str | None) -> Grader:
    """The grader for a record's ``category``: math unless the category names another.

    ``choice``/``multiple_choice``/``mcq`` get the choice grader, ``exact``
    and ``numeric`` theirs; everything else (``math``, ``physics``, none)
    gets math, whose text fallback also handles short non-math answers.
    """
    key = (record_category or "").strip().lower()
    return _BUILTIN[_CATEGORY_GRADERS.get(key, "math")]()
