r"""The answer a response commits to: one extractor for compactors, voting and graders.

A response states its answer in one of these ways, tried in this order on
its *conclusion* (the text after the last ``</think>``: a box the model wrote
while thinking and then revised does not count):

1. ``boxed``: the last ``\boxed{...}`` (or ``\fbox{...}``). An empty box
   states that there is no answer, so the response has none.
2. ``stated``: the last explicit statement, "the final answer is X",
   "Answer: X", "**Final Answer:** X" (X runs to the end of its line).
3. A documented fallback, chosen by the caller:

   - ``number`` (voting): the last number, or fraction ``a/b``, that is not
     part of an unevaluated expression. A model that writes "the original
     54-6 is ..." has restated the question, not answered it, so ``54-6``
     (and its 6) is no answer. A conclusion with no digit at all falls back
     to its last non-empty line ("Yes").
   - ``line`` (text answers, the ``answer`` compactor): the last non-empty
     line.
   - ``none``: no fallback (graders that run their own, such as math-verify's
     extraction in the math grader).

Two rules hold for every source:

- **A restatement is not an answer**: an unevaluated arithmetic expression
  (``54-6``, ``50 + 98``, ``3 \times 4``) that appears in the problem never
  counts as an answer to it, boxed or not (:func:`is_restatement`).
- **Junk is not an answer**: text with no letter or digit is unparsed
  (:func:`is_junk`). The math grader adds its own rule: a bare word that
  math-verify can only read as a product of symbols (``editoned``) is no
  math answer.

Answers are compared by :func:`answers_equivalent`: equal normalised text,
equal numbers (``0.5`` and ``1/2``), or, when math-verify is installed,
math-verify equivalence. Majority voting groups votes with it, so ``0.5`` and
``\frac{1}{2}`` vote together.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "Answer",
    "AnswerSource",
    "Fallback",
    "answers_equivalent",
    "exact_number",
    "extract_answer",
    "extract_boxed",
    "is_expression",
    "is_junk",
    "is_restatement",
    "normalize_answer",
    "problem_text",
    "reads_math",
    "split_conclusion",
    "stated_answer_present",
    "symbolic_form",
    "without_restatements",
]

THINK_CLOSE = "</think>"

AnswerSource = Literal["boxed", "stated", "number", "line"]
Fallback = Literal["number", "line", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """An answer as the response wrote it (stripped), and where it was found."""

    text: str
    source: AnswerSource


def split_conclusion(text: str) -> str:
    """Everything after the last ``</think>``; the whole text if there is none."""
    _head, sep, tail = text.rpartition(THINK_CLOSE)
    return tail if sep else text


def extract_boxed(text: str) -> list[str]:
    r"""Contents of every ``\boxed{...}`` (and ``\fbox{...}``), braces balanced, in order."""
    found: list[str] = []
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    found.append(text[start:i].strip())
                    break
    return found


# "The final answer is: 48", "Answer: 48", "**Final Answer:** $48$", "answer = 48".
_STATED = re.compile(
    r"(?:final\s+answer|\banswer)\s*\**\s*(?:is\s*:?|:|=)\s*\**[ \t]*(?P<answer>[^\n]+)",
    flags=re.IGNORECASE,
)
_NUMBER = r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w])"
_OPERATOR = r"(?:[-+*/×÷^−]|\\times|\\cdot|\\div)"
# A run of numbers joined by arithmetic operators; a lone number is a run of one.
_NUMERIC_RUN = re.compile(rf"{_NUMBER}(?:\s*{_OPERATOR}\s*-?\d[\d,]*(?:\.\d+)?(?![\w]))*")
_SIMPLE_FRACTION = re.compile(r"-?\d+\s*/\s*\d+")
_HAS_OPERATOR = re.compile(rf"\d\s*{_OPERATOR}\s*-?\d")


def _strip_wrapping(text: str) -> str:
    text = text.strip()
    for _ in range(3):
        text = text.strip().strip("*").strip()
        if len(text) >= 2 and text[0] == text[-1] == "$":
            text = text[1:-1]
        text = text.strip().rstrip(".").strip()
    return text


def _squash(text: str) -> str:
    """Expression text without spaces, ``$`` or LaTeX spacing, operators in one spelling."""
    text = text.replace("\\times", "*").replace("\\cdot", "*").replace("\\div", "/")
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    text = re.sub(r"\\left|\\right|\\[,;:! ]|[\s$]", "", text)
    return text


def is_expression(text: str) -> bool:
    """Numbers joined by at least one arithmetic operator (not a plain fraction ``a/b``)."""
    squashed = _squash(text).strip("()")
    if _SIMPLE_FRACTION.fullmatch(squashed):
        return False
    return bool(_HAS_OPERATOR.search(squashed)) and not re.search(r"[A-Za-z=]", squashed)


def is_restatement(candidate: str, problem: str | None) -> bool:
    """Whether ``candidate`` is an unevaluated expression copied from the problem.

    "54-6" for "What is 54 - 6?" is the question, not its answer; spacing,
    ``$`` and the spelling of the operators do not matter. Without a problem
    nothing is a restatement.
    """
    if not problem or not is_expression(candidate):
        return False
    return _squash(_strip_wrapping(candidate)) in _squash(problem)


def is_junk(candidate: str) -> bool:
    """Text that states nothing: no letter or digit once ``$``, ``*`` and periods are gone."""
    return not re.search(r"[0-9A-Za-z\u0080-\uffff]", _strip_wrapping(candidate))


def _number_fallback(conclusion: str) -> str | None:
    runs = list(_NUMERIC_RUN.finditer(conclusion))
    for match in reversed(runs):
        text = match.group(0).strip().rstrip(",")
        if is_expression(text):
            continue  # an unevaluated expression states no answer
        return text
    if runs:
        return None  # only expressions: a restated question, not a last line to fall back to
    return _line_fallback(conclusion)


def _line_fallback(conclusion: str) -> str | None:
    lines = [line.strip() for line in conclusion.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _accept(text: str, source: AnswerSource, problem: str | None) -> Answer | None:
    text = text.strip()
    if is_junk(text) or is_restatement(text, problem):
        return None
    return Answer(text=text, source=source)


def extract_answer(
    response: str, *, problem: str | None = None, fallback: Fallback = "number"
) -> Answer | None:
    r"""The answer ``response`` commits to, or None (see the module docstring for the rule).

    ``problem`` is the question's text; with it, restated expressions are
    recognised. Only the first source that is present decides: a response
    whose last ``\boxed{}`` is empty, junk or a restatement has no answer,
    whatever else it says.
    """
    conclusion = split_conclusion(response)
    boxed = extract_boxed(conclusion)
    if boxed:
        return _accept(boxed[-1], "boxed", problem) if boxed[-1] else None
    stated = list(_STATED.finditer(conclusion))
    if stated:
        text = _strip_wrapping(stated[-1].group("answer"))
        return _accept(text, "stated", problem) if text else None
    if fallback == "number":
        found = _number_fallback(conclusion)
        if found is None:
            return None
        source: AnswerSource = "number" if _NUMERIC_RUN.fullmatch(found) else "line"
        return _accept(found, source, problem)
    if fallback == "line":
        line = _line_fallback(conclusion)
        return _accept(line, "line", problem) if line is not None else None
    return None


def stated_answer_present(response: str) -> bool:
    """Whether the conclusion has a ``\\boxed{}`` or an explicit answer statement at all.

    When it has, its answer is the one :func:`extract_answer` reads or none:
    a grader must not fall back to reading other numbers of the text.
    """
    conclusion = split_conclusion(response)
    return bool(extract_boxed(conclusion)) or _STATED.search(conclusion) is not None


def without_restatements(text: str, problem: str | None) -> str:
    """``text`` with every expression copied from ``problem`` blanked out.

    What a number fallback may read when it must not skip every expression
    (a numeric grader reads "pages 3-4" as 4): for "What is 54 - 6?", in
    "so 54 - 6 = 48" only 48 remains and in "the original 54-6 is" nothing.
    """
    if not problem:
        return text
    return _NUMERIC_RUN.sub(
        lambda m: " " if is_restatement(m.group(0), problem) else m.group(0), text
    )


def problem_text(prompt: Any) -> str | None:
    """The problem a prompt asks: the text itself, or a conversation's last user message.

    Graders use it to recognise restatements; a synthesis prompt works too,
    since it quotes the original problem.
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for message in reversed(prompt):
            if isinstance(message, Mapping) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return " ".join(
                        str(part.get("text", "")) for part in content if isinstance(part, Mapping)
                    )
    return None


def normalize_answer(text: str) -> str:
    """Canonical text for comparing answers.

    No spaces, ``$``, trailing period, nor thousands commas in numbers.
    """
    text = text.strip().strip("$").strip().rstrip(".").strip()
    text = re.sub(r"\s+", "", text)
    if re.fullmatch(r"-?\d[\d,]*(\.\d+)?", text):
        text = text.replace(",", "")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    return text


def exact_number(text: str) -> Fraction | None:
    r"""The exact value of an answer written as a plain number (``0.5``, ``1/2``, ``\frac{1}{2}``).

    Two such answers are equivalent exactly when their values are equal:
    :func:`answers_equivalent` decides them without math-verify.
    """
    text = normalize_answer(text).replace("−", "-")
    match = re.fullmatch(r"\\[dt]?frac\{(-?\d+)\}\{(\d+)\}", text)
    if match:
        text = f"{match.group(1)}/{match.group(2)}"
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None
    return value


# Only short, tame answers go to sympy: a power tower or a huge factorial
# would hold the GIL for as long as building the number takes.
_MAX_VERIFY_CHARS = 200
_UNSAFE = re.compile(r"\^|\*\*|!|\\uparrow")


class _QuietTimeoutNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


_QUIET = _QuietTimeoutNotice()


@lru_cache(maxsize=1)
def _math_verify() -> Any:
    if importlib.util.find_spec("math_verify") is None:
        return None
    module = importlib.import_module("math_verify")
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_QUIET)
    return module


@lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[Any, ...]:
    mv = _math_verify()
    try:
        return tuple(mv.parse(f"${text}$", parsing_timeout=None))
    except Exception:
        return ()


def reads_math(text: str) -> bool:
    """Whether :func:`answers_equivalent` hands ``text`` to math-verify at all.

    Not when math-verify is not installed, nor when the answer is not safe to
    hand to sympy (powers, factorials or over 200 characters: evaluating them
    can take unbounded time).
    """
    return not (len(text) > _MAX_VERIFY_CHARS or _UNSAFE.search(text) or _math_verify() is None)


def symbolic_form(text: str) -> tuple[Any, ...]:
    """What math-verify reads in an answer (its sympy forms and matched strings), or ``()``.

    Empty when math-verify does not read the answer (:func:`reads_math`) or
    reads nothing in it. Cached per text, so an answer is parsed once however
    often it is compared.
    """
    return _parsed(text) if reads_math(text) else ()


def answers_equivalent(a: str, b: str) -> bool:
    """Whether two extracted answers say the same: text, number or math-verify equivalence.

    Without math-verify installed only the first two apply. Answers with
    powers, factorials or over 200 characters are compared as text and
    numbers only, because evaluating them can take unbounded time.
    (math-verify's ``verify`` is not symmetric: ``a`` is read as the gold.)
    """
    if normalize_answer(a) == normalize_answer(b):
        return True
    x, y = exact_number(a), exact_number(b)
    if x is not None and y is not None:
        return x == y
    mv = _math_verify()
    if mv is None:
        return False
    pa = symbolic_form(a)
    pb = symbolic_form(b) if pa else ()
    if not pa or not pb:
        return False
    try:
        return bool(mv.verify(list(pa), list(pb), timeout_seconds=None))
    except Exception:
        return False
