"""Load a dataset spec into records: the one function ``pacore eval`` and ``pacore run`` call.

:func:`load_dataset_spec` turns ``--dataset``/``--input`` (see
:mod:`pacore_graph.eval.datasets_spec`) into the
:class:`~pacore_graph.runs.runner.DatasetRecord` list both commands run:

- a ``.jsonl`` in our own format is read as it always was
  (:func:`~pacore_graph.runs.runner.read_dataset`: bad lines skipped and
  returned as ``input_errors``, reported with their line numbers);
- a benchmark (named, ``NAME:PATH``, ``module:attr``) or a hub-format source
  goes row by row through its adapter. Rows the benchmark leaves out on
  purpose (HLE's image questions) are counted in ``skipped`` by reason;
  rows outside ``--since/--until`` in ``filtered``. A malformed row stops the
  load with a :class:`~pacore_graph.eval.benchmarks.base.DatasetError` naming
  the file, the row and its id: a benchmark's score is over a fixed set, so
  running on whatever rows happened to parse would give a number that cannot
  be compared with anyone's, and nothing has been sent to a model yet.

A hub id that is a built-in benchmark's own source (``hf:MathArena/aime_2025``)
gets that benchmark's adapter, whatever other benchmark shares its columns; any
other hub id or local copy gets the first built-in whose columns it has. One
whose columns match no named benchmark is read with the generic map of the
``pacore run`` format (``messages``/``conversation``/``question``/``problem``/
``prompt`` for the problem, ``ground_truth`` or ``answer`` for the answer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from pacore_graph.eval.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    DatasetError,
    HubDataset,
    HubFiles,
    Skip,
)
from pacore_graph.eval.benchmarks.registry import (
    BUILTIN_BENCHMARKS,
    find_benchmark,
    load_benchmark_attr,
)
from pacore_graph.eval.code_tests import CODE_TESTS_KEY, MAX_TESTS, too_many_tests
from pacore_graph.eval.datasets_rows import RowSource, hub_file_sources, hub_source, local_source
from pacore_graph.eval.datasets_spec import DatasetSpec, parse_dataset_spec
from pacore_graph.eval.safe_pickle import UnsafePickleError
from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.runs.jsonl import BadLine
from pacore_graph.runs.runner import DatasetRecord, read_dataset

__all__ = ["GENERIC", "LoadedDataset", "detect_benchmark", "hub_benchmark", "load_dataset_spec"]

_TEXT_KEYS = ("question", "problem", "prompt")


@dataclass(frozen=True, slots=True)
class _GenericRecords(Benchmark):
    """Rows already in (or close to) the ``pacore run`` format."""

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        data = dict(row)
        if "messages" not in data and isinstance(data.get("conversation"), list):
            data["messages"] = data["conversation"]
        if "messages" not in data:
            text = next((data[k] for k in _TEXT_KEYS if isinstance(data.get(k), str)), None)
            if text is None:
                raise ValueError("no 'messages' list nor a 'question', 'problem' or 'prompt' text")
            data["messages"] = [{"role": "user", "content": text}]
        if "ground_truth" not in data and data.get("answer") is not None:
            data["ground_truth"] = {"answer": data["answer"]}
        data.setdefault("id", f"row-{number}")
        return data


GENERIC = _GenericRecords(
    name="generic",
    description="rows in the pacore run format (messages or question/problem/prompt, answer)",
    hub=HubDataset(""),
    columns=(),
)


@dataclass(frozen=True, slots=True)
class LoadedDataset:
    """What a spec loaded: records to run, and what was left out and why."""

    spec: DatasetSpec
    records: list[DatasetRecord]
    source: str
    benchmark: str | None = None
    input_errors: list[BadLine] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    filtered: int = 0

    def notes(self) -> list[str]:
        """One line per thing left out, for stderr and the report (never silent)."""
        lines = [f"{self.source}: skipped {n} {reason}(s)" for reason, n in self.skipped.items()]
        if self.filtered:
            lines.append(f"{self.source}: {self.filtered} row(s) outside --since/--until left out")
        return lines


def _within_test_cap(records: list[DatasetRecord], errors: list[BadLine]) -> list[DatasetRecord]:
    """The records whose code tests number at most :data:`MAX_TESTS`; the others are bad lines.

    Only the count is checked here (a test the dataset wrote badly is still
    the grader's ``bad_test``); the line is named, the other records run.
    """
    kept = []
    for record in records:
        gt = record.ground_truth
        tests = gt.get(CODE_TESTS_KEY) if isinstance(gt, Mapping) else None
        listed = tests.get("tests") if isinstance(tests, Mapping) else None
        if isinstance(listed, list) and len(listed) > MAX_TESTS:
            reason = f"code tests: {too_many_tests(len(listed))}"
            errors.append(BadLine(line=record.line, reason=reason))
            continue
        kept.append(record)
    errors.sort(key=lambda e: e.line)
    return kept


def hub_benchmark(hub: HubDataset) -> Benchmark | None:
    """The built-in benchmark whose own hub source is ``hub``'s repository (and config), if any.

    Its config must agree when both name one (``hf:Idavidrein/gpqa:gpqa_main`` is
    not GPQA Diamond); ``default`` stands for a benchmark that names none.
    Repository ids compare without case, as the hub resolves them.
    """
    for benchmark in BUILTIN_BENCHMARKS.values():
        if benchmark.hub.repo.lower() != hub.repo.lower():
            continue
        own = benchmark.hub.config if isinstance(benchmark.hub, HubDataset) else None
        if hub.config is None or hub.config == (own or "default"):
            return benchmark
    return None


def detect_benchmark(columns: Iterable[str], hub: HubDataset | None = None) -> Benchmark:
    """The benchmark a source without a named adapter is read with.

    For a hub id, the built-in whose hub source it is comes first: MathArena's
    HMMT and AIME share one column layout, so by columns alone
    ``hf:MathArena/aime_2025`` would be read as ``hmmt25`` (its ids, its
    report). Otherwise the first built-in whose required columns the source
    has, else the generic map.
    """
    if hub is not None:
        by_repo = hub_benchmark(hub)
        if by_repo is not None:
            return by_repo
    have = set(columns)
    for benchmark in BUILTIN_BENCHMARKS.values():
        if set(benchmark.columns) <= have:
            return benchmark
    return GENERIC


def _benchmark_of(spec: DatasetSpec) -> Benchmark:
    name = spec.benchmark or ""
    if ":" in name:
        return load_benchmark_attr(name)
    found = find_benchmark(name)
    if found is None:  # parse_dataset_spec saw the name, so this is a race with an uninstall
        raise DatasetError(f"{spec.text}: no benchmark called {name!r}")
    return found


def _wanted(benchmark: Benchmark) -> tuple[str, ...] | None:
    if benchmark is GENERIC:
        return None
    return (*benchmark.columns, *benchmark.optional_columns)


def _sources(spec: DatasetSpec, benchmark: Benchmark | None) -> list[RowSource]:
    wanted = _wanted(benchmark) if benchmark is not None else None
    if spec.kind == "hub":
        assert spec.repo is not None
        return [hub_source(HubDataset(spec.repo, spec.config, spec.split), wanted)]
    if spec.path is not None:
        if benchmark is not None and isinstance(benchmark.hub, HubFiles) and spec.path.is_dir():
            # a clone of the repository: its data files, not its loading script
            files = [spec.path / name for name in benchmark.hub.files]
            present = [f for f in files if f.is_file()]
            if present:
                return [local_source(f, wanted) for f in present]
        return [local_source(spec.path, wanted, spec.split, repo_folder=spec.kind == "benchmark")]
    assert benchmark is not None
    if isinstance(benchmark.hub, HubFiles):
        return hub_file_sources(benchmark.hub)
    if not benchmark.hub.repo:
        raise DatasetError(f"{spec.text}: the benchmark names no hub source; give NAME:PATH")
    return [hub_source(benchmark.hub, wanted)]


def _check_columns(source: RowSource, benchmark: Benchmark, spec: DatasetSpec) -> None:
    if not source.columns:
        return  # an empty file: no rows, reported as no usable records
    missing = [c for c in benchmark.columns if c not in source.columns]
    if missing:
        raise DatasetError(
            f"{source.where}: no column {', '.join(map(repr, missing))} for {benchmark.name} "
            f"(its columns: {', '.join(source.columns[:20])})"
        )


def _to_record(data: Mapping[str, Any], number: int, seen: set[str]) -> DatasetRecord:
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise ValueError("the adapter gave no list of {role, content} messages")
    normalize_conversation(messages)  # raises on an empty problem
    record_id = str(data.get("id"))
    if record_id in seen:
        raise ValueError(f"duplicate id {record_id!r}")
    seen.add(record_id)
    return DatasetRecord(
        id=record_id,
        messages=tuple(messages),
        line=number,
        ground_truth=data.get("ground_truth"),
        raw=dict(data),
    )


def _row_id(row: Mapping[str, Any]) -> str:
    for key in ("id", "question_id", "QUESTION_ID", "Record ID", "problem_idx"):
        value = row.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return f" (id {value})"
    return ""


def _check_dates(benchmark: Benchmark, options: BenchmarkOptions, spec: DatasetSpec) -> None:
    if (options.since or options.until) and not benchmark.dated:
        raise DatasetError(
            f"{spec.text}: --since/--until select by date, which {benchmark.name} has not "
            "(livecodebench has)"
        )
    if options.since and options.until and options.since > options.until:
        raise DatasetError(f"--since {options.since} is after --until {options.until}")


def load_dataset_spec(
    text: str | Path, *, since: date | None = None, until: date | None = None
) -> LoadedDataset:
    """Read every record a dataset argument names; see the module docstring for the policy."""
    spec = parse_dataset_spec(str(text))
    options = BenchmarkOptions(since=since, until=until)
    if spec.kind == "jsonl":
        if since or until:
            raise DatasetError(f"{spec.text}: --since/--until apply to a dated benchmark only")
        assert spec.path is not None
        plain, errors = read_dataset(spec.path)
        plain = _within_test_cap(plain, errors)
        return LoadedDataset(spec, plain, spec.text, input_errors=errors)
    benchmark = _benchmark_of(spec) if spec.kind == "benchmark" else None
    if benchmark is not None:
        _check_dates(benchmark, options, spec)
    sources = _sources(spec, benchmark)
    records: list[DatasetRecord] = []
    skipped: Counter[str] = Counter()
    filtered = 0
    seen: set[str] = set()
    chosen = benchmark
    hub = HubDataset(spec.repo, spec.config, spec.split) if spec.repo is not None else None
    for source in sources:
        adapter = chosen or detect_benchmark(source.columns, hub)
        if chosen is None:
            _check_dates(adapter, options, spec)
        _check_columns(source, adapter, spec)
        for number, row in source.rows:
            try:
                if not adapter.keep(row, options):
                    filtered += 1
                    continue
                made = adapter.record(row, number)
                if isinstance(made, Skip):
                    skipped[made.reason] += 1
                    continue
                records.append(_to_record(made, number, seen))
            except (ValueError, DatasetError, UnsafePickleError) as exc:  # the row's fault
                raise DatasetError(f"{source.where}: row {number}{_row_id(row)}: {exc}") from None
        chosen = adapter
    return LoadedDataset(
        spec=spec,
        records=records,
        source=sources[0].where if len(sources) == 1 else spec.text,
        benchmark=None if chosen is None or chosen is GENERIC else chosen.name,
        skipped=dict(skipped),
        filtered=filtered,
    )
