"""An answer's key: every pair math-verify finds equivalent meets; different answers do not.

Each rule of the key is checked on a pair that math-verify really finds
equivalent (the test asserts that first, so a rule that stopped mattering
would show), and the shortcut for plain numbers against math-verify's own
reading of them. The grouping's property tests
(``tests/values/test_answer_groups.py``) check the whole on generated sets.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

import pytest

from pacore_graph.values.answer_keys import (
    _CONSTANT_NAMES,
    ABS_TOLERANCE,
    AnswerKey,
    Probe,
    _numeric_latex,
    _parsed_key,
    answer_key,
    keys_meet,
    probes_meet,
)
from pacore_graph.values.answers import (
    answers_equivalent,
    exact_number,
    normalize_answer,
    symbolic_form,
)

PLAIN_NUMBERS = (
    "0",
    "7",
    "007",
    "-0",
    "-12",
    "123456789012345678901234567890",
    "0.5",
    "0.50",
    "-2.25",
    "3.14159265358979323846",
    "1/2",
    "-3/4",
    "0/5",
    "10/4",
    "\\frac{1}{2}",
    "\\frac{-3}{4}",
    "\\dfrac{6}{8}",
    "\\tfrac{5}{1}",
)


@pytest.mark.parametrize("text", PLAIN_NUMBERS)
def test_a_plain_number_is_keyed_as_math_verify_reads_it_without_parsing(text: str) -> None:
    """The shortcut's claim: math-verify reads one sympy number of the exact value."""
    key = answer_key(text)
    value = exact_number(text)
    assert value is not None
    forms = [f for f in symbolic_form(text) if not isinstance(f, str)]
    assert len(forms) == 1 and forms[0].is_Number
    assert Fraction(str(forms[0].evalf(30))) == pytest.approx(value, abs=1e-12)
    assert [p.space for p in key.probes] == [("scalar",)]
    assert key.probes[0].value == pytest.approx(complex(float(value)))
    if "." not in text:  # a symbol named as it prints matches it (math-verify's text fallback)
        assert ("str", str(forms[0])) in key.tokens


#: Pairs math-verify finds equivalent (read as gold, answer), one per rule of the key.
EQUIVALENT = (
    ("1/2", "0.5"),  # exact numbers
    ("0.5", "\\dfrac12"),  # a number and a LaTeX value
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),  # values of expressions
    ("0.333333", "\\dfrac13"),  # math-verify rounds floats to 6 decimals
    ("x+1", "1+x"),  # free symbols at a point
    ("50\\%", "50"),  # a percentage by its number
    ("50\\%", "0.5"),  # ... and by its value
    ("x = 0.5", "\\frac{1}{2}"),  # an assignment by its right-hand side
    ("\\frac{1}{2}", "x = 0.5"),  # an equation answer by its right-hand side
    ("x > 2", "2 < x"),  # relations over the same symbols
    ("x = 2", "2 = x"),
    ("1 < x < 2", "(1, 2)"),  # a relation as a set
    ("\\{0.5\\}", "\\frac{1}{2}"),  # a one-element set by its element
    ("(1, 2)", "1, 2"),  # an open interval and a pair
    ("\\{1, 2\\}", "\\{2, 1\\}"),  # a set by its elements' sum
    ("x < 3", "(-\\infty, 3)"),  # a relation as a set with an infinite end
    (
        "\\begin{pmatrix} 1 & 0.5 \\\\ 0 & 1 \\end{pmatrix}",
        "\\begin{bmatrix} 1 & \\frac{1}{2} \\\\ 0 & 1 \\end{bmatrix}",
    ),  # a matrix by its shape and entries
    ("e", "E"),  # math-verify's symbol e is Euler's number
    ("Yes", "yes"),  # products of the same letters
    ("listen", "silent"),  # ... whatever their order
    ("\\text{ab}", "ab"),  # a symbol and its letters' product
    ("\\text{Yes}", "\\text{yes}"),  # a name's case
    ("\\text{5}", "5"),  # a symbol printed like a number
    ("\\dfrac{6}{2}", "\\text{3}"),  # ... like a fraction's value
    ("\\{1, 1.0\\}", "1"),  # a set with equal elements is one element
    ("\\infty", "infinity"),  # the same infinity
    ("5 \\text{ cm}", "5"),  # what math-verify matched
)


@pytest.mark.parametrize(("gold", "answer"), EQUIVALENT)
def test_every_rule_lets_equivalent_answers_meet(gold: str, answer: str) -> None:
    assert answers_equivalent(gold, answer), "math-verify no longer finds these equivalent"
    assert keys_meet(answer_key(gold), answer_key(answer))
    assert keys_meet(answer_key(answer), answer_key(gold))


#: Different answers whose keys keep them apart: the vote never compares them.
APART = (
    ("\\sqrt{2}", "\\sqrt{3}"),
    ("1", "2"),
    ("0.5", "\\frac{1}{3}"),
    ("x+1", "x+2"),
    ("x+1", "y+1"),
    ("x = 1", "x = 2"),
    ("(1, 2)", "(1, 3)"),
    ("[1, 2]", "\\{1, 3\\}"),
    ("(-\\infty, 3)", "(3, \\infty)"),
    ("yes", "no"),
    ("\\text{Paris}", "\\text{London}"),
    (
        "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}",
        "\\begin{pmatrix} 1 & 0 \\\\ 0 & 2 \\end{pmatrix}",
    ),
)


@pytest.mark.parametrize(("a", "b"), APART)
def test_different_answers_do_not_meet(a: str, b: str) -> None:
    assert not answers_equivalent(a, b) and not answers_equivalent(b, a)
    assert not keys_meet(answer_key(a), answer_key(b))


@pytest.mark.parametrize(
    "text",
    [
        "\\int x dx",  # unevaluated calculus
        "\\lim_{x \\to 0} x",
        "\\text{a-b}",  # a symbol named like an expression (math-verify compares texts)
        "\\{1, 1.0\\}",  # a set with equal elements: it equals 1
    ],
)
def test_forms_without_a_rule_are_compared_with_everything(text: str) -> None:
    key = answer_key(text)
    assert key.wild
    assert keys_meet(key, answer_key("42")) and keys_meet(answer_key("yes"), key)


def test_answers_math_verify_does_not_read_meet_by_text_and_number_only() -> None:
    """Powers and over-long answers never reach sympy (answers_equivalent's guard)."""
    for text in ("2^{10}", "5!", "1" * 201):
        key = answer_key(text)
        assert key.probes == () and not key.wild
        assert ("text", text) in key.tokens
    assert keys_meet(answer_key("2^{10}"), answer_key("2^{ 10 }"))  # same normalised text
    assert not keys_meet(answer_key("2^{10}"), answer_key("1024"))
    assert not answers_equivalent("2^{10}", "1024")


def test_probe_tolerance_is_wider_than_math_verify_and_names_infinite_ends() -> None:
    a = Probe(("set", 2), complex(3.0), 3.0, 2, ("-oo",))
    assert probes_meet(a, Probe(("set", 2), complex(3.0 + ABS_TOLERANCE), 3.0, 2, ("-oo",)))
    assert not probes_meet(a, Probe(("set", 2), complex(3.1), 3.1, 2, ("-oo",)))
    assert not probes_meet(a, Probe(("set", 2), complex(3.0), 3.0, 2, ("oo",)))
    assert probes_meet(a, Probe(("set", 2), None, terms=2))
    assert not probes_meet(a, Probe(("set", 3), None, terms=3))


def test_keys_are_computed_once_per_text() -> None:
    assert answer_key("\\sqrt{7}") is answer_key("\\sqrt{7}")
    assert isinstance(answer_key("\\sqrt{7}"), AnswerKey)


def numeric_latex(draw: random.Random) -> str:
    """A random answer of the numeric-LaTeX shortcut's grammar."""

    def number() -> str:
        decimal = f"{draw.randint(0, 9)}.{draw.randint(1, 99)}"
        return draw.choice([str(draw.randint(0, 40)), decimal])

    def product() -> str:
        head = number() if draw.random() < 0.7 else ""
        count = draw.randint(0, 2)
        factors = [draw.choice([f"\\sqrt{{{number()}}}", "\\pi"]) for _ in range(count)]
        return head + "".join(factors) or "\\pi"

    kind = draw.random()
    if kind < 0.5:
        term = product()
    else:
        frac = draw.choice(["\\frac", "\\dfrac", "\\tfrac"])
        top = ("-" if draw.random() < 0.2 else "") + product()
        term = f"{frac}{{{top}}}{{{product()}}}"
    term = ("-" if draw.random() < 0.2 else "") + term
    if draw.random() < 0.3:
        term = draw.choice("abcxyzXYZ") + "=" + term
    return term


def test_numeric_latex_is_keyed_as_math_verify_reads_it_without_parsing() -> None:
    """The shortcut's claim: the parse-based key holds nothing else another key could meet."""
    draw = random.Random(3)
    checked = 0
    for _ in range(60):
        text = numeric_latex(draw)
        if _numeric_latex(text) is None:  # 0 in a denominator: parsed as usual
            continue
        checked += 1
        short = answer_key(text)
        parsed = _parsed_key(text, {("text", normalize_answer(text))})
        flags = ("relation", "set_like", "any_set", "wild")
        assert [getattr(short, f) for f in flags] == [getattr(parsed, f) for f in flags], text
        assert sorted(p.space for p in short.probes) == sorted(p.space for p in parsed.probes)
        for p in parsed.probes:
            same = [q for q in short.probes if q.space == p.space]
            assert p.value is not None and same[0].value == pytest.approx(p.value), text
        # Of the parsed key's tokens, only a printed text a symbol could be named
        # (an integer; a constant's name makes a symbol wild) can meet a key that no
        # value meets: the shortcut has those.
        named = {
            t
            for t in parsed.tokens
            if t[0] == "str"
            and re.fullmatch(r"\w+", str(t[1]))
            and str(t[1]) not in _CONSTANT_NAMES
        }
        assert named <= short.tokens, text
    assert checked > 40
