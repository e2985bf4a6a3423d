"""Finding one run in a ``results.jsonl`` of ``pacore run`` or ``pacore eval``.

A thin lookup over the results-file model (:mod:`pacore_graph.runs.results_file`,
which reads run lines and eval lines for every command): it picks the last
successful run of a problem and says what is available when that run is not
there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.errors import PaCoReError
from pacore_graph.runs.results_file import ResultLine, read_results
from pacore_graph.values.records import PaCoReResult

__all__ = ["FoundRun", "ResultLookupError", "find_run", "load_result"]


class ResultLookupError(PaCoReError):
    """The requested run is not in the results file, is ambiguous, or failed."""


@dataclass(frozen=True, slots=True)
class FoundRun:
    """One run of a results file: its result, ground truth and problem (when its line has them)."""

    result: PaCoReResult
    ground_truth: Any
    messages: list[dict[str, Any]] | None


def _messages(data: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The problem's messages of a results line (``messages``, else a ``question`` text)."""
    messages = data.get("messages")
    if isinstance(messages, list) and all(isinstance(m, Mapping) for m in messages):
        return [dict(m) for m in messages]
    for key in ("question", "problem", "prompt"):
        if isinstance(data.get(key), str):
            return [{"role": "user", "content": data[key]}]
    return None


def _few(ids: list[str], limit: int = 8) -> str:
    unique = list(dict.fromkeys(ids))
    shown = ", ".join(repr(i) for i in unique[:limit])
    more = f" and {len(unique) - limit} more" if len(unique) > limit else ""
    return (shown + more) if unique else "none"


def _pick(lines: list[ResultLine], what: str) -> tuple[PaCoReResult, ResultLine]:
    """The last successful line of ``lines`` (a re-run appends after a failure)."""
    good = [line for line in lines if line.ok]
    if not good:
        raise ResultLookupError(f"the run of {what} failed: {lines[-1].error}")
    line = good[-1]
    try:
        return line.result(), line
    except ValueError:
        raise ResultLookupError(f"the line of {what} has no 'rounds' record to draw") from None


def load_result(
    path: Path, problem_id: str, *, method: str | None = None, sample: int = 0
) -> tuple[PaCoReResult, Any]:
    """Find one run in a results file; return its result and its ground truth (or None).

    :func:`find_run` says how the run is found and what is raised.
    """
    found = find_run(path, problem_id, method=method, sample=sample)
    return found.result, found.ground_truth


def find_run(
    path: Path, problem_id: str, *, method: str | None = None, sample: int = 0
) -> FoundRun:
    """Find one run in a results file: its result, ground truth and problem messages.

    Reads both shapes (:mod:`pacore_graph.runs.results_file`): ``pacore run``
    output (the problem is matched by ``request_id``, ``id`` or
    ``problem_id``) and ``pacore eval`` output (matched by ``problem_id`` and
    ``sample``, and by ``method`` when given; ``method`` is required when the
    problem was run by several methods). When a problem has several lines (a
    failed run retried), the last successful one is used.

    Raises ``FileNotFoundError`` when the file is missing and
    :class:`ResultLookupError` (naming what is available) when the run is not
    there, is ambiguous, or failed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}")
    problem_id = str(problem_id)
    lines = [item for item in read_results(path) if isinstance(item, ResultLine)]
    if not lines:
        raise ResultLookupError(f"{path} holds no result lines")
    runs = [line for line in lines if not line.is_eval]
    evals = [line for line in lines if line.is_eval]

    matches = [line for line in runs if problem_id in line.ids]
    if matches:
        result, line = _pick(matches, repr(problem_id))
        if result.problem_id is None:
            result = dataclasses.replace(result, problem_id=problem_id)
        return FoundRun(result, line.data.get("ground_truth"), _messages(line.data))

    for_problem = [line for line in evals if line.problem_id == problem_id]
    if not for_problem:
        available = [line.problem_id for line in lines]
        raise ResultLookupError(
            f"no run of problem {problem_id!r} in {path}; available ids: {_few(available)}"
        )
    methods = list(dict.fromkeys(str(line.method) for line in for_problem))
    if method is not None:
        if method not in methods:
            raise ResultLookupError(
                f"problem {problem_id!r} has no run of method {method!r} in {path}; "
                f"its methods: {', '.join(methods)}"
            )
        for_problem = [line for line in for_problem if line.method == method]
    elif len(methods) > 1:
        raise ResultLookupError(
            f"problem {problem_id!r} was run by several methods in {path}: "
            f"{', '.join(methods)}; choose one (pacore graph --method METHOD, "
            "find_run(..., method=METHOD) in Python)"
        )
    chosen = [line for line in for_problem if line.sample == sample]
    if not chosen:
        samples = sorted({line.sample for line in for_problem})
        raise ResultLookupError(
            f"problem {problem_id!r} ({for_problem[0].method}) has no sample {sample}; "
            f"its samples: {', '.join(map(str, samples))}"
        )
    what = f"{problem_id!r} ({chosen[0].method}, sample {sample})"
    result, line = _pick(chosen, what)
    if result.problem_id is None:
        result = dataclasses.replace(result, problem_id=problem_id)
    return FoundRun(result, line.data.get("ground_truth"), _messages(line.data))
