r"""The ``math`` grader: answer equivalence with math-verify, bounded in time and size.

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
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from pacore_graph.eval.answer_size import cost_problem, number_before_unit
from pacore_graph.eval.grade import (
    Grade,
    GradingTimeoutError,
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
    is_expression,
    is_restatement,
    split_conclusion,
    stated_answer_present,
)

__all__ = ["MathGrader"]

_T = TypeVar("_T")


def _why_no_answer(response: str, problem: str | None) -> str:
    conclusion = split_conclusion(response)
    boxed = extract_boxed(conclusion)
    if boxed and not boxed[-1]:
        return "the response has an empty \\boxed{}"
    if boxed and is_restatement(boxed[-1], problem):
        return f"the boxed {boxed[-1]!r} restates the problem's expression, not an answer"
    if not boxed:
        return "the response's stated answer is empty, junk or restates the problem"
    return "the response's boxed answer states nothing"


def _is_word(text: str) -> bool:
    return re.fullmatch(r"\s*[A-Za-z]{3,}\s*\.?\s*", text) is not None


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

    The response is reduced to its answer as :mod:`pacore_graph.values.answers` reads
    it: the last ``\boxed{}`` of the conclusion (math-verify alone would read
    several boxed answers as one set) or an explicit "the answer is X"; when
    there is neither, the last ``tail_chars`` characters of the conclusion go
    to math-verify's own answer extraction, and what that finds must not be an
    unevaluated expression ("the original 54-6 is ..." restates the question).
    A boxed or stated expression copied from ``problem`` is no answer either,
    and a bare word (``editoned``, which math-verify would read as a product
    of symbols) is unparsed unless it equals the ground truth as text.

    The ground truth is read as LaTeX ("\frac{1}{2}",
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

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        return guarded(self.name, partial(self._grade, problem=problem), response, ground_truth)

    def _grade(self, response: str, ground_truth: Any, problem: str | None) -> Grade:
        answer = extract_answer(response, problem=problem, fallback="none")
        expected = ground_truth_answer(ground_truth)
        if answer is None and stated_answer_present(response):
            if expected is None:
                return no_ground_truth(None)
            return Grade(0.0, False, None, expected, _why_no_answer(response, problem))
        stated = answer is not None
        candidate = answer.text if answer is not None else split_conclusion(response)
        if not stated:
            candidate = candidate[-self.tail_chars :]
        if expected is None:
            return no_ground_truth(candidate if candidate.strip() else None)
        if not candidate.strip():
            return Grade(0.0, False, None, expected, "the response has an empty conclusion")
        return _call_with_deadline(
            lambda: self._verify(candidate, stated, expected), self.timeout_s
        )

    def _verify(self, candidate: str, boxed: bool, expected: str) -> Grade:
        text_equal = normalize_text(candidate) == normalize_text(expected)
        problem = cost_problem(expected, self.max_answer_chars) or cost_problem(
            candidate, self.max_answer_chars if boxed else self.tail_chars
        )
        if problem is not None:
            shown = candidate if boxed else last_line(candidate)
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
        if not boxed and is_expression(extracted):
            detail = f"{extracted!r} is an unevaluated expression, not an answer"
            return Grade(0.0, False, None, expected, detail)
        if boxed and _is_word(candidate):
            detail = f"{candidate.strip()!r} is a word, not a math answer"
            return Grade(0.0, False, None, expected, detail)
        if not gold:
            return Grade(0.0, True, extracted, expected, "ground truth is not math: text compared")
        ok = mv.verify(gold, pred, timeout_seconds=None)
        return Grade(1.0 if ok else 0.0, True, extracted, expected)

    @staticmethod
    def _parse_gold(mv: Any, expected: str) -> list[Any]:
        text = caret_powers(expected)
        number = number_before_unit(text)
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
        text = caret_powers(candidate)
        number = number_before_unit(text) if numeric_gold else None
        if number is not None:
            text = number
        pred = list(mv.parse(f"\\boxed{{{text}}}", parsing_timeout=None))
        if not _has_math(pred):
            plain = list(mv.parse(text, parsing_timeout=None))
            pred = plain if _has_math(plain) else pred
        return pred


# --------------------------------------------------------------------------- callables
