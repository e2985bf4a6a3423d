"""Generated answer sets for the vote's property tests: many spellings of few values.

Each form writes a value ``k`` (1..3) one way; drawing forms and values at
random gives sets where equivalent answers are common and written
differently (``1/2``, ``0.5``, ``\\frac{1}{2}``, ``\\dfrac12``, ``x = 0.5``,
``\\{0.5\\}``, ``50\\%``), beside intervals, sets, tuples, matrices, symbols
and text answers that math-verify reads in its own ways (``Yes`` is ``yes``,
``listen`` is ``silent``: both products of the same letters).
"""

from __future__ import annotations

import random

__all__ = ["FORMS", "WORDS", "answer_set"]

#: Value forms: ``{k}``, ``{k1}`` = k+1, ``{h}`` = k/2 as a decimal, ``{kk}`` = k², ``{k2}`` = 2k.
FORMS: tuple[str, ...] = (
    "{k}",
    "{k}.0",
    "-{k}",
    "{h}",
    "\\frac{{{k}}}{{2}}",
    "{k}/2",
    "\\dfrac{{{k}}}{{2}}",
    "\\dfrac{k}2",
    "\\tfrac{{{k}}}{{2}}",
    "-\\frac{{{k}}}{{2}}",
    "{k}0\\%",
    "{k}\\%",
    "x={k}",
    "x = \\frac{{{k}}}{{2}}",
    "x={h}",
    "y={k}",
    "{k}=x",
    "2x={k2}",
    "\\{{{k}\\}}",
    "\\{{{h}\\}}",
    "({k})",
    "\\sqrt{{{kk}}}",
    "{k}\\sqrt{{2}}",
    "\\sqrt{{{k2}}}",
    "{k}\\pi",
    "x+{k}",
    "{k}+x",
    "[{k}, {k1}]",
    "({k}, {k1})",
    "({k}, {k1}]",
    "\\{{{k}, {k1}\\}}",
    "\\{{{k1}, {k}\\}}",
    "{k}, {k1}",
    "(-\\infty, {k})",
    "x < {k}",
    "{k} < x < {k1}",
    "\\begin{{pmatrix}} {k} & 1 \\\\ 0 & {k} \\end{{pmatrix}}",
    "\\begin{{bmatrix}} {k} & 1 \\\\ 0 & {k} \\end{{bmatrix}}",
    "\\begin{{pmatrix}} {k}.0 & 1 \\\\ 0 & {k} \\end{{pmatrix}}",
    "\\text{{{k}}}",
    "{k} \\text{{ cm}}",
    "{k}i",
    "\\pm {k}",
)

#: Text and symbol answers, and constants.
WORDS: tuple[str, ...] = (
    "yes",
    "Yes",
    "YES",
    "no",
    "listen",
    "silent",
    "\\text{Yes}",
    "\\text{yes}",
    "Paris",
    "\\text{Paris}",
    "a",
    "A",
    "ab",
    "Ab",
    "\\text{ab}",
    "e",
    "E",
    "\\pi",
    "pi",
    "\\infty",
    "infinity",
    "\\emptyset",
    "x",
    "x+y",
    "y+x",
    "None",
    "\\frac{3}{0}",
    "\\text{3}",
    "\\{1, 1.0\\}",
)


def answer_set(seed: int, size: int, *, blanks: bool = True) -> list[str | None]:
    """``size`` answers drawn from the forms (values 1..3) and words; a few None and ``""``."""
    draw = random.Random(seed)
    answers: list[str | None] = []
    for _ in range(size):
        roll = draw.random()
        if blanks and roll < 0.05:
            answers.append(draw.choice([None, ""]))
        elif roll < 0.25:
            answers.append(draw.choice(WORDS))
        else:
            k = draw.randint(1, 3)
            answers.append(draw.choice(FORMS).format(k=k, k1=k + 1, h=k / 2, kk=k * k, k2=2 * k))
    return answers
