"""What a benchmark adapter is: a hub source, the columns it reads, and a row -> record map.

A benchmark lives on the Hugging Face hub with its own field names
(``problem``/``answer`` at MathArena, ``question_content``/``private_test_cases``
at LiveCodeBench, ``question``/``image``/``answer_type`` at HLE, ...). An
adapter maps one row of that layout onto the record every ``pacore run`` and
``pacore eval`` line is made of (:class:`~pacore_graph.runs.runner.DatasetRecord`):

- ``messages``: the prompt, as the benchmark's own harness words it;
- ``ground_truth``: ``{"answer": ...}`` for answer-checked tasks,
  ``{"code_tests": ...}`` (:mod:`pacore_graph.eval.code_tests`) for code,
  plus ``"rubric"`` naming the judge rubric for judged tasks;
- ``category``: which grader ``auto`` picks (``math``, ``choice``, ``code``,
  ``judge``).

The same adapter reads the hub (``NAME``) and a local copy in the hub's own
format (``NAME:PATH``): only where the rows come from differs
(:mod:`pacore_graph.eval.datasets_rows`). Third-party adapters register under
the ``pacore_graph.datasets`` entry-point group (an object like
:class:`Benchmark`, or a function returning one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pacore_graph.errors import PaCoReError

__all__ = [
    "Benchmark",
    "BenchmarkOptions",
    "DatasetError",
    "HubDataset",
    "HubFiles",
    "Skip",
    "cell_text",
    "parse_day",
]


class DatasetError(PaCoReError):
    """A dataset that cannot be used: unreadable, wrong layout, or a malformed row.

    The message is one line naming the file (or hub id) and, for a row, its
    1-based number and id, so ``pacore`` can print it as it is.
    """


@dataclass(frozen=True, slots=True)
class HubDataset:
    """A hub dataset read with ``datasets.load_dataset(repo, config, split=split)``."""

    repo: str
    config: str | None = None
    split: str | None = None


@dataclass(frozen=True, slots=True)
class HubFiles:
    """JSONL files of a hub dataset repository, fetched one by one into the hub cache.

    For repositories that ``datasets`` no longer loads: LiveCodeBench's
    ``code_generation_lite`` is a loading script, which ``datasets`` 4.0
    removed ("Dataset scripts are no longer supported"); its data are plain
    ``test*.jsonl`` files beside the script.
    """

    repo: str
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BenchmarkOptions:
    """Per-load choices an adapter may honour (``--since``/``--until`` for dated sets)."""

    since: date | None = None
    until: date | None = None


@dataclass(frozen=True, slots=True)
class Skip:
    """A row the benchmark leaves out on purpose (counted and reported, never silent)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Benchmark:
    """Base of the named benchmarks; subclasses override :meth:`record` (and maybe :meth:`keep`).

    ``columns`` must all be present (a missing one is a layout error naming
    it); ``optional_columns`` are read when there. ``dated`` says whether
    ``--since/--until`` apply.
    """

    name: str
    description: str
    hub: HubDataset | HubFiles
    columns: tuple[str, ...]
    optional_columns: tuple[str, ...] = ()
    dated: bool = False

    def keep(self, row: Mapping[str, Any], options: BenchmarkOptions) -> bool:
        """Cheap pre-filter on raw columns (before any decoding); True keeps the row."""
        return True

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        """The record for one row (``id``, ``messages``, ``ground_truth``, ``category``, ...).

        Raises ValueError (or :class:`DatasetError`) with the reason when the
        row is malformed; ``number`` is the row's 1-based position.
        """
        raise NotImplementedError


def cell_text(row: Mapping[str, Any], column: str, *, allow_empty: bool = False) -> str:
    """A column's value as text; a missing, non-text or empty value is a malformed row."""
    value = row.get(column)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"column {column!r} is {type(value).__name__}, not text")
    if not allow_empty and not value.strip():
        raise ValueError(f"column {column!r} is empty")
    return value


def parse_day(value: Any, what: str) -> date:
    """A date from ``2024-08-01``, an ISO timestamp, or a date/datetime object."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return datetime.fromisoformat(text).date()
        except ValueError:
            pass
    raise ValueError(f"{what} {value!r} is not a date (YYYY-MM-DD)")
