"""``pacore export-episodes``: results files to a dataset of graded episodes.

Three formats, all loadable with Hugging Face ``datasets``:

- ``jsonl``: ``OUT/episodes.jsonl``, one :meth:`Episode.to_row` per line
  (``load_dataset("json", data_files=...)``); needs nothing beyond the core;
- ``parquet``: ``OUT/episodes.parquet`` (``load_dataset("parquet", ...)``);
- ``hf``: ``OUT`` is a ``Dataset.save_to_disk`` folder (``load_from_disk(OUT)``).

``OUT`` may instead name the file itself (``--out x.jsonl``, ``--out
x.parquet``): the episodes go there and the report beside it
(``x.export_report.json``).

Each run is exported once: a results file given twice, or the same run found
in two files (its ``run_id``), adds its episodes only the first time.

The tabular formats are written with an explicit schema
(:func:`episode_features`), so a column that happens to be empty in one
export (no log-probabilities, say) still has its real type and exports can
be concatenated. Every format also gets ``OUT/export_report.json``.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from pacore_graph.eval.graders import Grader
from pacore_graph.rl import require_rl
from pacore_graph.rl.episodes import (
    Episode,
    ResultRun,
    SkippedLine,
    episodes_from_run,
    iter_result_runs,
)
from pacore_graph.rl.rows import ROW_FORMATS, check_row_format, write_rows
from pacore_graph.runs.atomic import write_text_atomic
from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE

__all__ = [
    "EXPORT_FORMATS",
    "ExportReport",
    "episode_features",
    "export_command",
    "export_episodes",
    "load_dataset_path",
    "load_episode_dataset",
    "report_path",
    "write_episodes",
]

EXPORT_FORMATS = ROW_FORMATS
JSONL_NAME = "episodes.jsonl"
PARQUET_NAME = "episodes.parquet"
REPORT_NAME = "export_report.json"
_SHOWN_SKIPS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportReport:
    """What an export read, wrote and left out.

    ``failed_trajectories`` were calls that returned nothing (not episodes);
    ``skipped_lines`` holds no usable run (failed runs, cut lines);
    ``ungraded`` episodes have no ground truth and so ``reward`` None.
    """

    sources: tuple[str, ...]
    out: str
    format: str
    files: tuple[str, ...]
    lines: int
    runs: int
    episodes: int
    failed_trajectories: int
    skipped_lines: int
    skip_reasons: tuple[str, ...]
    duplicate_runs: int
    graded: int
    ungraded: int
    mean_reward: float | None
    episodes_per_round: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["episodes_per_round"] = {str(r): n for r, n in self.episodes_per_round}
        return data

    def __str__(self) -> str:
        per_round = ", ".join(f"r{r}: {n}" for r, n in self.episodes_per_round) or "none"
        mean = "n/a" if self.mean_reward is None else f"{self.mean_reward:.3f}"
        lines = [
            f"exported {self.episodes} episodes from {self.runs} runs "
            f"({self.lines} lines) to {self.out} [{self.format}]",
            f"  per round: {per_round}",
            f"  graded: {self.graded}  ungraded (no ground truth): {self.ungraded}  "
            f"mean reward: {mean}",
            f"  failed trajectories (not episodes): {self.failed_trajectories}",
            f"  skipped lines: {self.skipped_lines}",
            f"  duplicate runs (exported once): {self.duplicate_runs}",
        ]
        lines += [f"    {reason}" for reason in self.skip_reasons]
        return "\n".join(lines)


def episode_features() -> Any:
    """The ``datasets.Features`` of an episode row (see :class:`Episode`)."""
    require_rl("datasets")
    from datasets import Features, List, Value

    string, i64, f64, boolean = Value("string"), Value("int64"), Value("float64"), Value("bool")
    return Features(
        {
            "schema_version": i64,
            "episode_id": string,
            "run_id": string,
            "problem_id": string,
            "method": string,
            "sample": i64,
            "round": i64,
            "index": i64,
            "trajectory_id": string,
            "final_round": boolean,
            "input_message_ids": List(string),
            "prompt": List({"role": string, "content": string}),
            "completion": string,
            "reasoning": string,
            "message": string,
            "reward": f64,
            "grader": string,
            "grade_parsed": boolean,
            "grade_extracted": string,
            "grade_expected": string,
            "grade_detail": string,
            "ground_truth": string,
            "category": string,
            "prompt_tokens": i64,
            "completion_tokens": i64,
            "tokens_estimated": boolean,
            "finish_reason": string,
            "truncated": boolean,
            "tool_calls": i64,
            "model": string,
            "preset": string,
            "schedule": List(i64),
            "sampling": string,
            "token_ids": List(i64),
            "logprobs": List(f64),
            "logprob_tokens": List(string),
        }
    )


_FILE_SUFFIX = {"jsonl": ".jsonl", "parquet": ".parquet"}


def _episodes_file(out: Path, fmt: str) -> Path | None:
    """The file ``out`` names when it is one (``x.jsonl``), else None (a folder)."""
    if out.suffix not in _FILE_SUFFIX.values():
        return None
    if _FILE_SUFFIX.get(fmt) != out.suffix:
        raise ValueError(
            f"--out {out} names a {out.suffix} file but --format is {fmt}; "
            "give a folder, or a file name that matches the format"
        )
    if out.is_dir():
        return None  # an existing folder that happens to be named x.jsonl
    return out


def report_path(out: str | Path, fmt: str) -> Path:
    """Where an export's report goes: in the folder, or beside the episodes file."""
    target = Path(out)
    file = _episodes_file(target, fmt)
    if file is None:
        return target / REPORT_NAME
    return file.with_name(f"{file.stem}.{REPORT_NAME}")


def write_episodes(episodes: Sequence[Episode], out: str | Path, fmt: str = "jsonl") -> list[Path]:
    """Write episodes to ``out`` in one of :data:`EXPORT_FORMATS`; return the files.

    ``out`` is a folder, or (jsonl and parquet) the episodes file itself.
    """
    check_row_format(fmt)
    target = Path(out)
    file = _episodes_file(target, fmt)
    if file is None:
        if target.exists() and not target.is_dir():
            raise ValueError(
                f"--out {target} is a file; give a folder, or a .jsonl/.parquet file name"
            )
        target.mkdir(parents=True, exist_ok=True)
    path = write_rows(
        (e.to_row() for e in episodes),
        fmt,
        target,
        jsonl_name=JSONL_NAME,
        parquet_name=PARQUET_NAME,
        features=episode_features,
        file=file,
    )
    return [path]


def _mean(values: Iterable[float]) -> float | None:
    data = list(values)
    return math.fsum(data) / len(data) if data else None


def export_episodes(
    results: str | Path | Sequence[str | Path],
    out: str | Path,
    fmt: str = "jsonl",
    *,
    grader: Grader | None = None,
    template: str = SYNTHESIS_TEMPLATE,
    sampling: Mapping[str, Any] | None = None,
) -> ExportReport:
    """Read results file(s), build graded episodes, write them; return the report.

    ``grader`` defaults to the grader for each record's ``category``;
    ``template`` must be the synthesis template the runs used; ``sampling``
    is recorded on episodes whose results line does not carry its own.
    Raises FileNotFoundError for a missing results file and ValueError for a
    bad format, before anything is written.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    paths = [Path(results)] if isinstance(results, str | Path) else [Path(p) for p in results]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"results file {path} does not exist")
    report_file = report_path(out, fmt)
    if fmt != "jsonl":
        require_rl("datasets", "pyarrow")
    episodes: list[Episode] = []
    skipped: list[str] = []
    seen_runs: set[str] = set()
    lines = runs = failed = duplicates = 0
    for path in paths:
        for item in iter_result_runs(path):
            lines += 1
            if isinstance(item, SkippedLine):
                skipped.append(f"{path.name}:{item}")
                continue
            run: ResultRun = item
            if run.run_id in seen_runs:
                duplicates += 1
                continue
            seen_runs.add(run.run_id)
            try:
                built = episodes_from_run(run, grader=grader, template=template, sampling=sampling)
            except ValueError as exc:
                skipped.append(f"{path.name}:line {run.line}: {exc}")
                continue
            runs += 1
            failed += run.result.failures
            episodes.extend(built)
    files = write_episodes(episodes, out, fmt)
    rewards = [e.reward for e in episodes if e.reward is not None]
    per_round = Counter(e.round for e in episodes)
    report = ExportReport(
        sources=tuple(str(p) for p in paths),
        out=str(out),
        format=fmt,
        files=tuple(str(f) for f in files),
        lines=lines,
        runs=runs,
        episodes=len(episodes),
        failed_trajectories=failed,
        skipped_lines=len(skipped),
        skip_reasons=tuple(skipped[:_SHOWN_SKIPS]),
        duplicate_runs=duplicates,
        graded=len(rewards),
        ungraded=len(episodes) - len(rewards),
        mean_reward=_mean(rewards),
        episodes_per_round=tuple(sorted(per_round.items())),
    )
    write_text_atomic(report_file, json.dumps(report.to_dict(), indent=1))
    return report


def export_command(
    results: Path | Sequence[Path],
    out: Path,
    fmt: str,
    *,
    grader: Grader | None = None,
    template: str | None = None,
    stream: IO[str] | None = None,
) -> ExportReport:
    """``pacore export-episodes RESULTS --out DIR --format jsonl|parquet|hf``.

    Prints the report (to ``stream``, default stdout) and returns it. Raises
    FileNotFoundError / ValueError for bad input (exit code 2) and
    :class:`~pacore_graph.rl.RLDependencyError` when ``parquet``/``hf`` is
    asked without the ``[rl]`` extra.
    """
    report = export_episodes(
        results, out, fmt, grader=grader, template=template or SYNTHESIS_TEMPLATE
    )
    print(report, file=stream or sys.stdout)
    return report


def load_dataset_path(path: Path, names: Sequence[str]) -> Any:
    """A ``datasets.Dataset`` from a ``save_to_disk`` folder, a folder holding one of
    ``names`` (first found wins), or a JSONL/Parquet file; None for a folder with none.

    Episode exports and training sets share this: both are written as one of
    these three shapes.
    """
    require_rl("datasets")
    from datasets import load_dataset, load_from_disk

    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "state.json").is_file():
            return load_from_disk(str(path))
        found = next((path / n for n in names if (path / n).is_file()), None)
        if found is None:
            return None
        path = found
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    kind = "parquet" if path.suffix == ".parquet" else "json"
    return load_dataset(kind, data_files=str(path), split="train")


def load_episode_dataset(path: str | Path) -> Any:
    """Load an export (its folder or file) as a ``datasets.Dataset``, whatever its format."""
    p = Path(path)
    dataset = load_dataset_path(p, (PARQUET_NAME, JSONL_NAME))
    if dataset is None:
        raise FileNotFoundError(f"{p} holds no exported episodes ({JSONL_NAME}, {PARQUET_NAME})")
    return dataset
