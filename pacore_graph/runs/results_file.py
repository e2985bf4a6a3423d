"""The results file: what one line of ``pacore run`` / ``pacore eval`` output means.

Two commands write results and four things read them (resuming a run or an
eval, ``pacore graph``, ``pacore export-episodes``, ``pacore trainset``), so
the schema is read here once:

- a **run line** (``pacore run --input``): the problem's id as
  ``request_id``/``id``/``problem_id`` and the result's fields at the top
  level; its key is ``(None, problem_id, 0)``;
- an **eval line** (``pacore eval``): ``method``, ``problem_id``, ``sample``
  and the result under ``result``; its key is ``(method, problem_id, sample)``.

Either may carry ``error`` instead of a result: the run failed and is retried
on resume. A re-run appends; :func:`compact_results` then rewrites the file
atomically with one line per key, the latest successful line winning over
older ones and over error lines, so a resumed file holds exactly one line per
run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.runs.atomic import write_lines_atomic
from pacore_graph.runs.jsonl import BadLine, JsonLine, iter_raw_lines, read_lines
from pacore_graph.values.records import PaCoReResult

__all__ = [
    "ResultKey",
    "ResultLine",
    "compact_results",
    "latest_lines",
    "parse_result_line",
    "read_results",
]

ResultKey = tuple[str | None, str, int]
"""``(method, problem_id, sample)``; ``method`` is None for a ``pacore run`` line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultLine:
    """One line of a results file, of either shape."""

    line: int
    problem_id: str
    method: str | None
    sample: int
    data: Mapping[str, Any]

    @property
    def is_eval(self) -> bool:
        return self.method is not None

    @property
    def key(self) -> ResultKey:
        return (self.method, self.problem_id, self.sample)

    @property
    def error(self) -> str | None:
        error = self.data.get("error")
        return str(error) if error else None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ids(self) -> set[str]:
        """Every id this line answers to (a run line may name its problem three ways)."""
        if self.is_eval:
            return {self.problem_id}
        keys = ("request_id", "id", "problem_id")
        return {str(self.data[k]) for k in keys if self.data.get(k) is not None}

    @property
    def result_data(self) -> Mapping[str, Any]:
        """The :meth:`PaCoReResult.to_dict` part; ValueError when the line has none."""
        if self.error:
            raise ValueError(f"the run failed ({self.error[:120]})")
        data = self.data.get("result") if self.is_eval else self.data
        if not isinstance(data, Mapping) or "rounds" not in data:
            raise ValueError("no 'rounds' or 'result': not a pacore run / pacore eval results line")
        return data

    def result(self) -> PaCoReResult:
        """The run's result (ValueError when the line has none)."""
        try:
            return PaCoReResult.from_dict(self.result_data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a malformed result record ({type(exc).__name__}: {exc})") from None


def parse_result_line(item: JsonLine) -> ResultLine | BadLine:
    """Which run a line is; a :class:`BadLine` when it names none."""
    data = item.data
    if "method" in data and "sample" in data:
        problem = data.get("problem_id")
        sample = data.get("sample")
        if problem is None or not isinstance(sample, int) or isinstance(sample, bool):
            return BadLine(line=item.line, reason="an eval line without problem_id/sample")
        return ResultLine(
            line=item.line,
            problem_id=str(problem),
            method=str(data["method"]),
            sample=sample,
            data=data,
        )
    problem = data.get("request_id", data.get("id", data.get("problem_id")))
    if problem is None:
        return BadLine(line=item.line, reason="no request_id/id/problem_id: not a results line")
    return ResultLine(line=item.line, problem_id=str(problem), method=None, sample=0, data=data)


def read_results(path: str | Path) -> Iterator[ResultLine | BadLine]:
    """Every line of a results file as a :class:`ResultLine` or a :class:`BadLine`."""
    for item in read_lines(path):
        yield item if isinstance(item, BadLine) else parse_result_line(item)


def latest_lines(lines: Iterable[ResultLine]) -> list[ResultLine]:
    """One line per key: the latest successful one, else the latest; in file order."""
    chosen: dict[ResultKey, ResultLine] = {}
    for line in lines:
        held = chosen.get(line.key)
        if held is None or line.ok or not held.ok:
            chosen[line.key] = line
    return sorted(chosen.values(), key=lambda line: line.line)


def compact_results(path: str | Path) -> tuple[int, int]:
    """Rewrite a results file atomically with one line per run; return (lines before, after).

    Lines that are not results (a line cut by a crash: that run ran again)
    are dropped. Two streaming passes (which lines to keep, then copy them as
    written), so memory stays bounded by the number of runs, not the file's
    size; nothing is rewritten when every line is already the one kept.
    """
    target = Path(path)
    if not target.is_file():
        return (0, 0)
    chosen: dict[ResultKey, tuple[int, bool]] = {}
    before = 0
    for item in read_results(target):
        before += 1
        if isinstance(item, ResultLine):
            held = chosen.get(item.key)
            if held is None or item.ok or not held[1]:
                chosen[item.key] = (item.line, item.ok)
    keep = {line for line, _ok in chosen.values()}
    if len(keep) == before:
        return before, before

    def kept_lines() -> Iterator[str]:
        with open(target, "rb") as fh:
            for lineno, raw in iter_raw_lines(fh):  # a line over the cap is never kept
                if lineno in keep and raw is not None:
                    yield raw.decode("utf-8").rstrip("\r\n")

    write_lines_atomic(target, kept_lines())
    return before, len(keep)
