"""Which answers are too big to evaluate exactly, and numbers written with units.

Building a huge integer (a power tower such as ``10^{10^{10}}``, a power or
factorial with millions of digits) is one C call that holds the GIL: no
thread-based timeout can interrupt it, and while it runs no other thread of
the process runs either. :func:`cost_problem` recognises such answers from
their text, before sympy sees them, so the math grader compares them as
text instead.
"""

from __future__ import annotations

import re

from pacore_graph.eval.grade import caret_powers

__all__ = ["cost_problem", "number_before_unit"]


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


def cost_problem(text: str, max_chars: int) -> str | None:
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


def number_before_unit(text: str) -> str | None:
    """``32`` for "32 cm^2" or "20 m/s^2"; None when the rest is not unit-like.

    A single bare letter is not taken for a unit ("3 x" is 3x in LaTeX);
    ``\\text{..}``-wrapped units and words of two or more letters are.
    """
    match = _NUMBER_WITH_UNIT.match(caret_powers(text))
    if match is None:
        return None
    unit = match.group("unit")
    if "\\" not in unit and sum(ch.isalpha() for ch in unit) < 2:
        return None
    return match.group("number").replace("−", "-")
