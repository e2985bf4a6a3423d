"""``pacore eval``: every method on every problem, graded, resumable, reported.

Methods run one after another (so each has a meaningful wall time), each with
its problems and samples concurrently through one compiled graph; all methods
share one limit on samples in flight. Every run is appended to
``DIR/results.jsonl`` as soon as it is graded, keyed by (method, problem,
sample): a re-run with the same ``DIR`` skips what already succeeded and
retries what failed; with a ``checkpointer`` (the CLI's default: SQLite in
``DIR``) a killed run also resumes each unfinished run where it stopped
(:mod:`pacore_graph.runs.fanout`). At the end ``DIR/report.json``, ``DIR/report.md`` and
``DIR/scaling.png`` are written from the whole file.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.eval.graders import (
    Grade,
    Grader,
    auto_grader,
    grade_response,
    has_ground_truth,
)
from pacore_graph.eval.methods import MethodSpec, build_method_graph
from pacore_graph.eval.plot import plot_scaling
from pacore_graph.eval.report import MethodStats, summarize, write_report
from pacore_graph.llm.client import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.runs.atomic import write_text_atomic
from pacore_graph.runs.checkpoint import DEFAULT_DURABILITY, CheckpointDurability
from pacore_graph.runs.fanout import Job, run_jobs
from pacore_graph.runs.jsonl import iter_objects, open_append
from pacore_graph.runs.private_files import private_dir
from pacore_graph.runs.progress import live_progress
from pacore_graph.runs.results_file import ResultLine, compact_results, read_results
from pacore_graph.runs.runner import DatasetRecord
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.values.answers import problem_text
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor
from pacore_graph.values.records import PaCoReResult

__all__ = ["EvalOutcome", "completed_runs", "run_eval"]

RESULTS = "results.jsonl"
TIMINGS = "timings.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalOutcome:
    """What ``run_eval`` produced: the stats per method and where the files are."""

    stats: dict[str, MethodStats]
    results: Path
    report_json: Path
    report_md: Path
    plot: Path
    skipped: int
    ran: int


def _key(method: str, problem_id: str, sample: int) -> tuple[str, str, int]:
    return (method, problem_id, sample)


def completed_runs(path: Path) -> set[tuple[str, str, int]]:
    """(method, problem, sample) keys that already have a successful line."""
    if not Path(path).exists():
        return set()
    return {
        _key(str(line.method), line.problem_id, line.sample)
        for line in read_results(path)
        if isinstance(line, ResultLine) and line.is_eval and line.ok
    }


def _line_head(spec: MethodSpec, record: DatasetRecord, sample: int) -> dict[str, Any]:
    """The keys every run line starts with, succeeded or failed."""
    return {
        "method": spec.text,
        "family": spec.family,
        "problem_id": record.id,
        "sample": sample,
    }


def _run_line(
    spec: MethodSpec, record: DatasetRecord, sample: int, result: PaCoReResult, grade: Grade
) -> dict[str, Any]:
    return {
        **_line_head(spec, record, sample),
        "score": grade.score,
        "parsed": grade.parsed,
        "extracted": grade.extracted,
        "expected": grade.expected,
        "grade_detail": grade.detail,
        **({"grade_info": dict(grade.info)} if grade.info else {}),
        "answer": result.answer,
        "effective_ttc": result.effective_ttc,
        "trajectories": len(result.trajectories),
        "failed_trajectories": result.failures,
        "truncations": result.truncations,
        "wall_s": round(result.wall_s, 4),
        "error": None,
        "category": record.raw.get("category"),
        "ground_truth": record.ground_truth,
        "messages": list(record.messages),
        "result": result.to_dict(),
    }


def _error_line(
    spec: MethodSpec, record: DatasetRecord, sample: int, exc: BaseException, wall: float
) -> dict[str, Any]:
    return {
        **_line_head(spec, record, sample),
        "score": 0.0,
        "parsed": False,
        "effective_ttc": 0,
        "wall_s": round(wall, 4),
        "error": f"{type(exc).__name__}: {exc}",
        "category": record.raw.get("category"),
        "ground_truth": record.ground_truth,
        "messages": list(record.messages),
    }


def _judge_meta(lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The judge's tokens and verdicts over the graded runs, apart from every method's TTC.

    Numbers, so a script sums or compares them; ``report.md`` words them
    (:func:`~pacore_graph.eval.report.report_markdown`).
    """
    infos = [line.get("grade_info") for line in lines]
    tokens = [
        int(i["judge_tokens"]) for i in infos if isinstance(i, Mapping) and "judge_tokens" in i
    ]
    if not tokens:
        return {}
    return {"judge_tokens": sum(tokens), "judge_verdicts": len(tokens)}


async def run_eval(
    records: Sequence[DatasetRecord],
    methods: Sequence[MethodSpec],
    client: ChatClient,
    *,
    config: PaCoReConfig,
    out_dir: Path,
    samples: int = 1,
    grader: Grader | None = None,
    category_graders: Mapping[str, Grader] | None = None,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    progress: bool = True,
    progress_file: IO[str] | None = None,
    meta: Mapping[str, Any] | None = None,
    tracing: TraceOptions | bool | None = None,
    checkpointer: Any = None,
    durability: CheckpointDurability = DEFAULT_DURABILITY,
) -> EvalOutcome:
    """Run, grade and report; see the module docstring for files and resuming.

    ``grader`` grades every record; without it each record gets
    ``category_graders[category]`` (lower-cased; e.g. a configured judge for
    ``judge``, a code grader with ``--grader-workers`` for ``code``), else
    :func:`~pacore_graph.eval.graders.auto_grader` for its category.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if not methods:
        raise ValueError("no methods to evaluate")
    graded = [r for r in records if has_ground_truth(r.ground_truth)]
    if not graded:
        raise ValueError("no record has a ground truth answer to grade against")
    private_dir(out_dir)
    results_path = out_dir / RESULTS
    timings_path = out_dir / TIMINGS
    timings: dict[str, float] = (
        json.loads(timings_path.read_text()) if timings_path.exists() else {}
    )
    done = completed_runs(results_path)
    limiter = SequenceLimiter(config.max_concurrency)
    skipped = ran = 0
    namespace = f"eval:{out_dir.resolve()}"

    with open_append(results_path) as sink:
        for spec in methods:
            graph = build_method_graph(
                spec,
                client,
                config=config,
                compactor=compactor,
                limiter=limiter,
                tracing=tracing,
            )
            todo = [
                (record, s)
                for record in graded
                for s in range(samples)
                if _key(spec.text, record.id, s) not in done
            ]
            skipped += len(graded) * samples - len(todo)
            if not todo:
                continue
            started = time.perf_counter()

            async def finished(
                job: Job,
                result: PaCoReResult | None,
                exc: BaseException | None,
                spec: MethodSpec = spec,
                *,
                bar: Any,
            ) -> None:
                record, sample, t0 = job.payload
                if result is None:
                    err = exc or RuntimeError("no result")
                    line = _error_line(spec, record, sample, err, time.perf_counter() - t0)
                else:
                    category = record.raw.get("category")
                    chosen = (
                        grader
                        or (category_graders or {}).get(str(category or "").strip().lower())
                        or auto_grader(category)
                    )
                    grade = await asyncio.to_thread(
                        grade_response,
                        chosen,
                        result.answer,
                        record.ground_truth,
                        problem_text(record.messages),
                    )
                    line = _run_line(spec, record, sample, result, grade)
                sink.write(json.dumps(line, ensure_ascii=False) + "\n")
                sink.flush()
                bar.update(1)

            jobs = [
                Job(
                    thread_id=f"{namespace}:{spec.text}:{record.id}:{sample}",
                    state={"messages": list(record.messages), "problem_id": record.id},
                    payload=(record, sample, started),
                )
                for record, sample in todo
            ]
            # A line per finished run, and while runs go on one every 5 s of silence
            # (a sample of the embedded model takes up to 90 s), off a terminal.
            async with live_progress(
                len(todo), desc=spec.text, unit="run", enabled=progress, file=progress_file
            ) as bar:
                await run_jobs(
                    graph,
                    jobs,
                    functools.partial(finished, bar=bar),
                    max_in_flight=config.max_concurrency,
                    checkpointer=checkpointer,
                    durability=durability,
                )
            ran += len(todo)
            timings[spec.text] = round(time.perf_counter() - started, 3)
            write_text_atomic(timings_path, json.dumps(timings, indent=1))  # errors name it

    compact_results(results_path)  # one line per (method, problem, sample), latest winning
    wanted = {m.text for m in methods}
    ids = {r.id for r in graded}
    lines = [
        line
        for line in iter_objects(results_path)
        if line.get("method") in wanted
        and str(line.get("problem_id")) in ids
        and int(line.get("sample", 0)) < samples
    ]
    stats = summarize(
        lines,
        wall_s={m: timings[m] for m in wanted if m in timings},
        method_order=[m.text for m in methods],
    )
    report_meta = {
        "model": getattr(client, "model", None),
        "problems": len(graded),
        "samples": samples,
        "grader": grader.name if grader is not None else "auto (by category)",
        "compactor": compactor if isinstance(compactor, str) else compactor.name,
        "max_tokens": config.sampling.max_tokens,
        "temperature": config.sampling.temperature,
        **_judge_meta(lines),
        **(meta or {}),
    }
    json_path, md_path = write_report(out_dir, stats, report_meta)
    plot_path = plot_scaling(
        stats,
        out_dir / "scaling.png",
        title=str(meta.get("title")) if meta and meta.get("title") else None,
    )
    return EvalOutcome(
        stats=stats,
        results=results_path,
        report_json=json_path,
        report_md=md_path,
        plot=plot_path,
        skipped=skipped,
        ran=ran,
    )
