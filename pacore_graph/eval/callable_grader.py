"""A user's grading function as a grader, and loading one by ``module:function``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pacore_graph.eval.grade import Grade, ground_truth_answer, guarded

__all__ = ["CallableGrader", "load_callable"]


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

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        return guarded(self.name, self._grade, response, ground_truth)

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


def load_callable(spec: str) -> Any:
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
