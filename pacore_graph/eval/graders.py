r"""Graders: score a response against a problem's ground truth, in [0, 1].

Every grader is one method, ``grade(response, ground_truth, problem=None) ->
Grade``, and every grader keeps one promise: **it never raises**. An evaluation runs
thousands of responses from models that write anything; a response that
cannot be read is a wrong answer (score 0, ``parsed=False``, the reason in
``detail``), never a crashed run. Programming errors still surface: they land
in ``detail`` of every grade, where a report shows them.

All built-ins grade the *answer* of a response as :mod:`pacore_graph.graph.answers`
reads it, the same answer the ``answer`` compactor keeps and majority voting
counts: the last ``\\boxed{}`` of the conclusion (after the last
``</think>``), else an explicit "the answer is X", else each grader's
documented fallback. An unevaluated expression copied from the problem
(``54-6`` for "What is 54 - 6?") is never an answer, and text that parses to
nothing is unparsed, not a wrong answer.

- ``math``: answer equivalence with math-verify (LaTeX and numeric).
- ``exact``: normalised string equality.
- ``numeric``: the last number, exact for integers, relative tolerance else.
- ``choice``: a multiple-choice letter A-J.
- ``module:function``: a user's callable returning a bool, a float or a Grade.

This module is the registry; the graders live in ``grade`` (the protocol and
:class:`Grade`), ``text_graders``, ``math_grader`` (with the threads and
time-bound notes) and ``callable_grader``.
"""

from __future__ import annotations

from collections.abc import Callable

from pacore_graph.eval.callable_grader import CallableGrader, load_callable
from pacore_graph.eval.grade import (
    Grade,
    Grader,
    GradingTimeoutError,
    grade_response,
    ground_truth_answer,
)
from pacore_graph.eval.math_grader import MathGrader
from pacore_graph.eval.text_graders import ChoiceGrader, ExactGrader, NumericGrader

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
    "grade_response",
    "grader_from_name",
    "ground_truth_answer",
]


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
    obj = load_callable(spec)
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
