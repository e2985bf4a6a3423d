r"""An answer's key: what it could be equivalent to, computed once per answer text.

Why: :func:`~pacore_graph.values.answers.answers_equivalent` decides whether
two answers say the same (normalised text, exact numbers, then math-verify),
and math-verify takes milliseconds per call. A vote that compares every pair
of K distinct answers costs K²/2 such calls (120 for 16 answers, 32,640 for
256). An :class:`AnswerKey` holds invariants that every answer equivalent to
it shares, so a vote needs math-verify only between answers whose keys meet
(:func:`keys_meet`; :mod:`pacore_graph.values.answer_groups` finds them with an
index): each answer is parsed once, and an answer written as a plain number
(``42``, ``0.5``, ``1/2``, ``\frac{1}{2}``) is not parsed at all.

A key is a *necessary* condition, read from math-verify 0.9.0's ``verify``
(``sympy_expr_eq`` and the comparisons it calls): whenever
``answers_equivalent(a, b)`` holds, ``keys_meet(answer_key(a),
answer_key(b))`` holds. Over-approximating costs a comparison; missing a pair
would change a vote, so anything this module does not understand is *wild*
(compared with everything). What meets:

- **tokens** (equal hashable values): the normalised text; the exact value of
  a plain number; the strings math-verify matched; each sympy form's printed
  text (its structural equality, and the text comparison math-verify falls
  back to when one side is a symbol); a symbol's name (math-verify's case
  rule) and a product of symbols' concatenated names (``abc`` is ``a*b*c``).
- **probes**: a numeric value in a space, close within a tolerance far wider
  than math-verify's (it rounds floats to 6 decimals and evaluates to 15
  digits): a scalar (free symbols evaluated at a fixed rational point per
  name, so expressions equal as functions have equal values; a percentage
  also by its number, since math-verify compares ``9\%`` and ``9``); a set,
  tuple or interval of n elements (their sum: math-verify compares them
  element by element); a matrix of a shape (the sum of its entries); a
  relation over a set of symbols (an assignment ``x = 3`` by its right-hand
  side, any other relation by nothing: all relations over the same symbols
  meet). A value that cannot be computed is "any value" in its space.
  An equation also has its right-hand side's keys (math-verify compares
  ``x = 3`` with ``3``), and a one-element set its element's (``{3}`` with
  ``3``).
- **flags**: a relation meets every set (math-verify turns a relation into a
  set to compare it with one); a set it cannot reduce to elements (a union,
  the empty set) meets every set; a finite set with two equal elements
  (``{1, 1.0}``: as a set it is ``{1}``, which equals ``1``) is wild.

Keys are cached per answer text (:func:`answer_key`), so an answer is
analysed once per process however many votes it takes part in.
"""

from __future__ import annotations

import cmath
import itertools
import math
import re
import zlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pacore_graph.values.answers import exact_number, normalize_answer, reads_math, symbolic_form

__all__ = [
    "ABS_TOLERANCE",
    "REL_TOLERANCE",
    "AnswerKey",
    "Probe",
    "answer_key",
    "keys_meet",
    "probe_window",
    "probes_meet",
]

#: Probe values meet when they differ by at most ``terms * ABS_TOLERANCE +
#: REL_TOLERANCE * (scale + terms)``: ten times math-verify's float rounding
#: (6 decimals), a million times its evaluation precision.
ABS_TOLERANCE = 1e-5
REL_TOLERANCE = 1e-6

# A plain number whose math-verify reading is a sympy number of the same value
# (checked for every form by tests/values/test_answer_keys.py): no parse needed.
_PLAIN_NUMBER = re.compile(
    r"-?[0-9]+(?:\.[0-9]+)?|-?[0-9]+/[0-9]+|\\[dt]?frac\{-?[0-9]+\}\{[0-9]+\}"
)
# A symbol named like this prints like a number or another expression, so the
# text comparison math-verify falls back to could match forms this key cannot see.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")
_CONSTANT_NAMES = frozenset(
    {"pi", "E", "I", "oo", "zoo", "nan", "EulerGamma", "Catalan", "GoldenRatio"}
)
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class Probe:
    """A numeric value in a space: ``value`` None is any value there.

    ``scale`` is the magnitude the value was summed from (``sum(|v_i|)``) and
    ``terms`` how many values were summed: both widen the tolerance. ``tag``
    names the infinite values left out of a sum (``("-oo",)`` for the
    interval ``(-oo, 3)``): math-verify matches ``oo`` only with ``oo``.
    """

    space: tuple[Hashable, ...]
    value: complex | None
    scale: float = 0.0
    terms: int = 1
    tag: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """What an answer could be equivalent to (see the module docstring)."""

    tokens: frozenset[Hashable]
    probes: tuple[Probe, ...] = ()
    relation: bool = False
    set_like: bool = False
    any_set: bool = False
    wild: bool = False


def probe_window(probe: Probe) -> float:
    """How far another value may be from ``probe``'s and still meet it (an upper bound)."""
    return probe.terms * ABS_TOLERANCE + REL_TOLERANCE * (probe.scale + probe.terms)


def probes_meet(p: Probe, q: Probe) -> bool:
    """Same space and close values (either may be any value)."""
    if p.space != q.space:
        return False
    if p.value is None or q.value is None:
        return True
    if p.tag != q.tag:
        return False
    window = p.terms * ABS_TOLERANCE + REL_TOLERANCE * (min(p.scale, q.scale) + p.terms)
    return abs(p.value - q.value) <= window


def keys_meet(a: AnswerKey, b: AnswerKey) -> bool:
    """Whether two answers could be equivalent: the pairwise definition the index follows."""
    if a.wild or b.wild or a.tokens & b.tokens:
        return True
    if (a.relation and b.set_like) or (a.set_like and b.relation):
        return True
    if (a.any_set and b.set_like) or (a.set_like and b.any_set):
        return True
    return any(probes_meet(p, q) for p in a.probes for q in b.probes)


@lru_cache(maxsize=16384)
def answer_key(text: str) -> AnswerKey:
    """The key of one answer text, as :func:`answers_equivalent` would read it (cached)."""
    tokens: set[Hashable] = {("text", normalize_answer(text))}
    number = exact_number(text)
    if number is not None:
        tokens.add(("number", number))
    if number is not None and _PLAIN_NUMBER.fullmatch(text) and len(text) <= 200:
        # math-verify reads a sympy number of this value (and nothing else). A fraction
        # (or integer) prints as sympy's Rational does ("3" for 6/2), which a symbol
        # named "3" (\text{3}) matches by math-verify's text fallback; a decimal is a
        # Float, whose printed text no plain symbol name can match.
        if "." not in text:
            tokens.add(("str", str(number)))
        value = complex(float(number))
        return AnswerKey(tokens=frozenset(tokens), probes=(Probe(("scalar",), value, abs(value)),))
    if not reads_math(text):  # compared as text and exact number only
        return AnswerKey(tokens=frozenset(tokens))
    numeric = _numeric_latex(text)
    if numeric is not None:
        return _numeric_key(tokens, *numeric)
    return _parsed_key(text, tokens)


def _parsed_key(text: str, tokens: set[Hashable]) -> AnswerKey:
    """The key read from math-verify's own forms of ``text`` (one parse, cached)."""
    forms = symbolic_form(text)
    if not forms:  # math-verify reads nothing: compared as text and exact number only
        return AnswerKey(tokens=frozenset(tokens))
    acc = _Views(tokens)
    for form in forms:
        if isinstance(form, str):
            if form.strip():
                acc.tokens.add(("matched", form.strip()))
        else:
            try:
                acc.add(form, 0)
            except Exception:  # a form this module cannot read: compare it with everything
                acc.wild = True
    return AnswerKey(
        tokens=frozenset(acc.tokens),
        probes=tuple(acc.probes),
        relation=acc.relation,
        set_like=acc.set_like,
        any_set=acc.any_set,
        wild=acc.wild,
    )


# Numeric LaTeX that math-verify reads as a number without symbols: a product of
# a number, square roots of numbers and pi, or a fraction of two such products,
# maybe negated, maybe assigned to a letter (x=2\sqrt{3}). Keyed by its value
# without a parse (checked against math-verify's parse by the tests).
_NUM = r"[0-9]{1,15}(?:\.[0-9]{1,15})?"
_PRODUCT = rf"(?:{_NUM})?(?:\\sqrt\{{{_NUM}\}}|\\pi)*"
_NUMERIC = re.compile(
    rf"(?:(?P<name>[a-df-hj-zA-DF-HJ-Z])=)?(?P<minus>-?)"
    rf"(?:(?P<product>{_PRODUCT})|\\[dt]?frac\{{(?P<top_minus>-?)(?P<top>{_PRODUCT})\}}"
    rf"\{{(?P<bottom>{_PRODUCT})\}})"
)
_FACTOR = re.compile(rf"(?P<num>{_NUM})|\\sqrt\{{(?P<root>{_NUM})\}}|\\pi")


def _product(text: str) -> float | None:
    if not text:
        return None
    value = 1.0
    for factor in _FACTOR.finditer(text):
        if factor.group("num") is not None:
            value *= float(factor.group("num"))
        elif factor.group("root") is not None:
            value *= math.sqrt(float(factor.group("root")))
        else:
            value *= math.pi
    return value


def _numeric_latex(text: str) -> tuple[str | None, float] | None:
    """``(assigned letter, value)`` of a numeric LaTeX answer, or None for anything else."""
    match = _NUMERIC.fullmatch(text)
    if match is None:
        return None
    if match.group("product") is not None:
        value = _product(match.group("product"))
    else:
        top, bottom = _product(match.group("top")), _product(match.group("bottom"))
        if top is None or not bottom:
            return None
        value = (-top if match.group("top_minus") else top) / bottom
    if value is None or not math.isfinite(value):
        return None
    name = match.group("name")
    return (name.lower() if name else None), (-value if match.group("minus") else value)


def _numeric_key(tokens: set[Hashable], name: str | None, value: float) -> AnswerKey:
    """What the parse-based key of a numeric LaTeX answer holds that any other key could meet."""
    if abs(value - round(value)) < 1e-9:  # sympy may print it as the integer a symbol matches
        tokens.add(("str", str(round(value))))
    scalar = Probe(("scalar",), complex(value), abs(value))
    if name is None:
        return AnswerKey(tokens=frozenset(tokens), probes=(scalar,))
    assigned = Probe(("relation", frozenset({name})), complex(value), abs(value))
    return AnswerKey(tokens=frozenset(tokens), probes=(assigned, scalar), relation=True)


def _point(name: str) -> Any:
    """The value a free symbol takes: a fixed rational in (0.25, 2.75) per name."""
    from sympy import Rational

    return Rational(1000 + zlib.crc32(name.encode()) % 10007, 4003)


_INFINITE = object()


def _value(expr: Any) -> complex | object | None:
    """``expr``'s numeric value, free symbols at their points.

    None when it has no number (an undefined function); ``_INFINITE`` when
    its value is not finite.
    """
    from sympy import UnevaluatedExpr

    if expr.has(UnevaluatedExpr):
        expr = expr.replace(lambda x: isinstance(x, UnevaluatedExpr), lambda x: x.args[0])
    symbols = expr.free_symbols
    if symbols:
        expr = expr.xreplace({s: _point(s.name) for s in symbols})
    try:
        value = complex(expr.evalf(15))
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None
    if not cmath.isfinite(value):
        return _INFINITE if not symbols else None
    return value


Total = tuple[complex, float, tuple[str, ...]]


def _total(exprs: list[Any]) -> Total | None:
    """The sum of the finite values, their magnitude and the infinite ones' texts.

    None when a value is unknown, or an element is a percentage (math-verify
    may compare it by its number or by its value).
    """
    finite: list[complex] = []
    infinite: list[str] = []
    for expr in exprs:
        if _is_percent(expr):
            return None
        value = _value(expr)
        if value is None:
            return None
        if isinstance(value, complex):
            finite.append(value)
        else:
            infinite.append(str(expr))
    return sum(finite, 0j), sum(abs(v) for v in finite), tuple(sorted(infinite))


def _is_percent(expr: Any) -> bool:
    """latex2sympy's ``X%``: ``X * UnevaluatedExpr(1/100)``."""
    from sympy import Mul, Rational, UnevaluatedExpr

    return (
        isinstance(expr, Mul)
        and len(expr.args) == 2
        and expr.args[1] == UnevaluatedExpr(Rational(1, 100))
    )


@dataclass(slots=True)
class _Views:
    """Collects the tokens, probes and flags of one answer's sympy forms."""

    tokens: set[Hashable]
    probes: list[Probe] = field(default_factory=list)
    relation: bool = False
    set_like: bool = False
    any_set: bool = False
    wild: bool = False

    def add(self, expr: Any, depth: int) -> None:
        from math_verify.grader import is_assignment_relation, is_equation, is_relation
        from sympy import (
            Derivative,
            Expr,
            FiniteSet,
            Integral,
            Interval,
            Limit,
            MatrixBase,
            Product,
            Set,
            Sum,
            Symbol,
            Tuple,
        )
        from sympy.matrices.expressions import MatrixExpr

        if depth > _MAX_DEPTH:
            self.wild = True
            return
        self.tokens.add(("str", str(expr)))
        if is_relation(expr):
            self._relation(expr, depth, is_assignment_relation(expr), is_equation(expr))
        elif isinstance(expr, MatrixBase):
            self._probe(("matrix", tuple(expr.shape)), _total(list(expr)), max(1, len(expr)))
        elif isinstance(expr, MatrixExpr):
            self.wild = True
        elif isinstance(expr, FiniteSet | Tuple):
            self._elements(list(expr.args), depth)
        elif isinstance(expr, Interval):
            self.set_like = True
            self._probe(("set", 2), _total([expr.start, expr.end]), 2)
        elif isinstance(expr, Set):  # unions, the empty set, ...: compared with every set
            self.set_like = self.any_set = True
        elif isinstance(expr, Symbol):
            self._symbol(expr.name)
        elif not isinstance(expr, Expr) or expr.has(Integral, Limit, Derivative, Sum, Product):
            self.wild = True  # booleans, unevaluated calculus: not worth a rule
        else:
            self._expression(expr)

    def _probe(self, space: tuple[Hashable, ...], total: Total | None, terms: int) -> None:
        if total is None:
            self.probes.append(Probe(space, None, terms=terms))
        else:
            value, scale, tag = total
            self.probes.append(Probe(space, value, scale, terms, tag))

    def _relation(self, expr: Any, depth: int, assignment: bool, equation: bool) -> None:
        from math_verify.grader import take_first_relation, take_last_relation
        from sympy import Eq

        self.relation = True
        rhs = take_last_relation(expr).rhs
        form = Eq(take_first_relation(expr).lhs, rhs, evaluate=False) if assignment else expr
        space = ("relation", frozenset(s.name for s in form.free_symbols))
        value = _value(rhs) if assignment and not getattr(rhs, "free_symbols", True) else None
        if isinstance(value, complex):
            self.probes.append(Probe(space, value, abs(value)))
        else:
            self.probes.append(Probe(space, None))
        if equation:  # math-verify compares x = 3 with 3 by its right-hand side
            self.add(rhs, depth + 1)

    def _elements(self, elements: list[Any], depth: int) -> None:
        self.set_like = True
        if len(elements) == 1:  # math-verify compares {3} (and (3,)) with 3
            self.add(elements[0], depth + 1)
        total = _total(elements) if all(_is_scalar(e) for e in elements) else None
        if total is not None and _has_close_pair([_value(e) for e in elements]):
            # {1, 1.0}: sympy keeps both, but as a set it is {1}, which equals 1 too.
            self.wild = True
        self._probe(("set", len(elements)), total, max(1, len(elements)))

    def _symbol(self, name: str) -> None:
        self.tokens.add(("symbol", name if len(name) == 1 else name.lower()))
        self.tokens.add(("symbols", name.lower()))
        if name.lower() == "e":  # math-verify reads a symbol e as Euler's number
            self.probes.append(Probe(("scalar",), complex(cmath.e), cmath.e))
        if name in _CONSTANT_NAMES or not _PLAIN_NAME.fullmatch(name):
            self.wild = True

    def _expression(self, expr: Any) -> None:
        from sympy import E, Mul, Symbol

        if isinstance(expr, Mul) and all(a == E or isinstance(a, Symbol) for a in expr.args):
            names = "".join(a.name if isinstance(a, Symbol) else "e" for a in expr.args)
            self.tokens.add(("symbols", names.lower()))
        if _is_percent(expr):  # math-verify compares 9% with 9
            self._scalar(_value(expr.args[0]))
        self._scalar(_value(expr))

    def _scalar(self, value: Any) -> None:
        if value is _INFINITE:
            return  # oo equals only oo (the printed-text token); zoo and nan nothing
        if isinstance(value, complex):
            self.probes.append(Probe(("scalar",), value, abs(value)))
        else:
            self.probes.append(Probe(("scalar",), None))


def _is_scalar(expr: Any) -> bool:
    from math_verify.grader import is_relation
    from sympy import Expr, MatrixBase, Set, Symbol, Tuple

    return (
        isinstance(expr, Expr)
        and not isinstance(expr, Symbol | MatrixBase | Set | Tuple)
        and not is_relation(expr)
    )


def _has_close_pair(values: list[Any]) -> bool:
    finite = [v for v in values if isinstance(v, complex)]
    ordered = sorted(finite, key=lambda v: (v.real, v.imag))
    return any(
        abs(a - b) <= 2 * ABS_TOLERANCE + REL_TOLERANCE * (abs(a) + abs(b))
        for a, b in itertools.pairwise(ordered)
    )
