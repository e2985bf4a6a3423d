r"""Graders: score a response against a problem's ground truth, in [0, 1].

Every grader is one method, ``grade(response, ground_truth, problem=None) ->
Grade``, and every grader keeps one promise: **it never raises**. An evaluation runs
thousands of responses from models that write anything; a response that
cannot be read is a wrong answer (score 0, ``parsed=False``, the reason in
``detail``), never a crashed run. Programming errors still surface: they land
in ``detail`` of every grade, where a report shows them.

All built-ins grade the *answer* of a response as :mod:`pacore_graph.values.answers`
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
- ``code``: the answer's last fenced code block run against the record's
  tests in the sandbox (:mod:`.code_grader`); chosen for ``category: code``.
- ``judge``: an LLM judge with the benchmark's rubric (:mod:`.judge`); it
  needs a judge server, so the CLI builds it from ``--judge-base-url`` and
  ``--judge-model``.
- ``module:function``: a user's callable returning a bool, a float or a Grade.
- ``NAME`` registered by an installed package under the ``pacore_graph.graders``
  entry-point group: a grader object, or a class or zero-argument factory
  returning one (``[project.entry-points."pacore_graph.graders"]`` ``mygrader =
  "mypkg.grading:MyGrader"``).

This module is the registry; the graders live in ``grade`` (the protocol and
:class:`Grade`), ``text_graders``, ``math_grader`` (with the threads and
time-bound notes) and ``callable_grader``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

from pacore_graph.eval.callable_grader import CallableGrader, load_callable
from pacore_graph.eval.code_grader import CodeGrader
from pacore_graph.eval.code_tests import CODE_TESTS_KEY
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
    "ENTRY_POINT_GROUP",
    "CallableGrader",
    "ChoiceGrader",
    "CodeGrader",
    "CodeOrAnswerGrader",
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
    "has_ground_truth",
    "registered_graders",
]

ENTRY_POINT_GROUP = "pacore_graph.graders"
"""The entry-point group third-party graders register under."""


_BUILTIN: dict[str, Callable[[], Grader]] = {
    "math": MathGrader,
    "exact": ExactGrader,
    "numeric": NumericGrader,
    "choice": ChoiceGrader,
    "code": CodeGrader,
}

_NEEDS_SETUP = {
    "judge": "the judge grader needs a judge server: pass --judge-base-url URL and "
    "--judge-model NAME (in Python, build pacore_graph.eval.judge.JudgeGrader)",
}

_CATEGORY_GRADERS: dict[str, str] = {
    "choice": "choice",
    "multiple_choice": "choice",
    "multiple-choice": "choice",
    "mcq": "choice",
    "exact": "exact",
    "numeric": "numeric",
    "code": "code",
    "judge": "judge",
}


class _UnconfiguredJudge:
    """What ``category: judge`` gets without a judge: an unparsed 0 that says what to pass."""

    name = "judge"

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        return Grade(0.0, False, detail=_NEEDS_SETUP["judge"])


_UNCONFIGURED_JUDGE = _UnconfiguredJudge()


def registered_graders() -> dict[str, Any]:
    """Graders installed packages register under :data:`ENTRY_POINT_GROUP`, by name (not loaded)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _as_grader(obj: Any, spec: str) -> Grader:
    """A loaded object as a grader: a ready one, a class or factory making one, or a function."""
    if isinstance(obj, Grader) and not isinstance(obj, type):
        return obj
    if not callable(obj):
        raise TypeError(
            f"grader {spec!r} is a {type(obj).__name__}, not a function "
            "(response, ground_truth) -> bool | float | Grade"
        )
    takes_nothing = isinstance(obj, type)
    if not takes_nothing:
        try:
            params = inspect.signature(obj).parameters.values()
            takes_nothing = not any(
                p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                for p in params
            )
        except (TypeError, ValueError):
            takes_nothing = False
    if takes_nothing:
        made = obj()
        if not isinstance(made, Grader):
            raise TypeError(f"grader {spec!r} made a {type(made).__name__}, not a grader")
        return made
    return CallableGrader(obj, name=spec)


def grader_from_name(spec: str) -> Grader:
    """Resolve a CLI name: a built-in, a registered entry point, or ``module:function``.

    ``module:function`` may also name a ready grader object (anything with
    ``name`` and ``grade``), which is returned as it is, or a grader class;
    a plain callable is wrapped in :class:`CallableGrader`.
    """
    spec = spec.strip()
    if spec in _BUILTIN:
        return _BUILTIN[spec]()
    if spec in _NEEDS_SETUP:
        raise ValueError(_NEEDS_SETUP[spec])
    if ":" not in spec:
        registered = registered_graders()
        if spec in registered:
            return _as_grader(registered[spec].load(), spec)
        offer = [*_BUILTIN, *_NEEDS_SETUP, *sorted(registered)]
        raise ValueError(f"unknown grader {spec!r}; choose {', '.join(offer)} or module:function")
    return _as_grader(load_callable(spec), spec)


def has_ground_truth(gt: Any) -> bool:
    """Whether a record carries something to grade against: an answer, code tests or a rubric."""
    if ground_truth_answer(gt) is not None:
        return True
    if isinstance(gt, Mapping):
        keys = (CODE_TESTS_KEY, "pass_criteria", "PASS_CRITERIA", "public_test_cases", "tests")
        return any(gt.get(key) for key in keys)
    return hasattr(gt, "tests")


class CodeOrAnswerGrader:
    """``category: code`` graded by what the record carries: its tests, else its answer.

    A record with tests (``code_tests``) is run by ``code``; one with only an
    answer ("what does this program print?", or a code pool scored by answer
    as the RL recipe's stage-1 filter does) is graded by the math grader's
    answer equivalence, as every code record was before the code grader.
    """

    name = "code"

    def __init__(self, code: CodeGrader) -> None:
        self.code = code
        self._answers = MathGrader()

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        if ground_truth_answer(ground_truth) is not None and not _has_tests(ground_truth):
            return grade_response(self._answers, response, ground_truth, problem)
        return self.code.grade(response, ground_truth, problem)


def _has_tests(gt: Any) -> bool:
    if isinstance(gt, Mapping):
        return any(gt.get(key) for key in (CODE_TESTS_KEY, "tests", "public_test_cases"))
    return hasattr(gt, "tests")


@lru_cache(maxsize=1)
def _shared_code_grader() -> CodeOrAnswerGrader:
    """One code grader for every ``auto_grader("code")``: its sandbox starts once."""
    return CodeOrAnswerGrader(CodeGrader())


def auto_grader(record_category: str | None) -> Grader:
    """The grader for a record's ``category``: math unless the category names another.

    ``choice``/``multiple_choice``/``mcq`` get the choice grader, ``exact``
    and ``numeric`` theirs, ``code`` the code grader for records with tests
    and answer equivalence for those with only an answer
    (:class:`CodeOrAnswerGrader`, one shared instance with default limits;
    pass your own :class:`CodeGrader` for others), ``judge``
    a grader that scores 0 unparsed and says a judge must be configured (a
    judged task is never graded by answer matching); everything else
    (``math``, ``physics``, none) gets math, whose text fallback also
    handles short non-math answers.
    """
    key = (record_category or "").strip().lower()
    name = _CATEGORY_GRADERS.get(key, "math")
    if name == "code":
        return _shared_code_grader()
    if name == "judge":
        return _UNCONFIGURED_JUDGE
    return _BUILTIN[name]()
