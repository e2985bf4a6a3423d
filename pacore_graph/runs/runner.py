"""Batch runs over a JSONL dataset, resumable, written as each problem finishes.

Input records use the public PaCoRe pipeline's format: ``{"id", "messages",
"ground_truth"?, ...}``. Output lines carry the public pipeline's fields
(``request_id``, ``final_response``, ``final_reasoning_content``,
``round_responses``) plus this project's full record (``answer``,
``effective_ttc``, ``rounds`` of trajectory records, ...).

- A malformed input line (not UTF-8, not JSON, a lone-surrogate escape, no
  usable messages) is reported with its line number and skipped; the other
  problems run (:mod:`pacore_graph.runs.jsonl` reads, with its one error policy).
- A problem whose run fails is written with ``"error"`` and is *not* counted
  as finished, so a re-run retries it; a re-run with the same output file
  skips ids that already have a successful line, and at the end the file is
  rewritten (atomically) with exactly one line per id, the latest winning
  (:func:`pacore_graph.runs.results_file.compact_results`).
- Every problem goes through one compiled graph, so the graph's concurrency
  limit on model calls is shared by all of them.
- With a checkpointer (the CLI's default: SQLite beside the output), a run
  killed half-way resumes each unfinished problem where it stopped
  (:mod:`pacore_graph.runs.fanout`).
- A failure that is the run's, not a problem's -- the checkpoint store gone
  (:class:`~pacore_graph.runs.store_guard.StoreError`), a line that cannot be
  written (``OSError`` naming the file, e.g. a full disk) -- stops every
  problem and is raised; the lines written so far stay, and a re-run resumes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.runs.checkpoint import DEFAULT_DURABILITY, CheckpointDurability
from pacore_graph.runs.fanout import Job, run_jobs
from pacore_graph.runs.jsonl import BadLine, open_append, read_lines
from pacore_graph.runs.private_files import private_dir
from pacore_graph.runs.progress import progress_bar
from pacore_graph.runs.results_file import ResultLine, compact_results, read_results
from pacore_graph.values.records import PaCoReResult

__all__ = [
    "PACORE_MODEL_NODES",
    "DatasetRecord",
    "InputError",
    "RunSummary",
    "finished_ids",
    "read_dataset",
    "result_line",
    "run_dataset",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetRecord:
    """One problem of a dataset, with the line it came from."""

    id: str
    messages: tuple[Mapping[str, Any], ...]
    line: int
    ground_truth: Any = None
    raw: Mapping[str, Any] = field(default_factory=dict)


InputError = BadLine
"""A dataset line that could not be used, and why (the one "bad line" class)."""


@dataclass(slots=True)
class RunSummary:
    """Counts of a dataset run."""

    total: int = 0
    skipped: int = 0
    succeeded: int = 0
    failed: int = 0
    input_errors: list[InputError] = field(default_factory=list)
    wall_s: float = 0.0
    effective_ttc: int = 0


#: Keys whose text is taken as the problem when a record has no ``messages``
#: (the common names in math datasets), in this order.
_TEXT_KEYS = ("question", "problem", "prompt")

#: The nodes of a ``build_pacore_graph`` graph that call a model: its explorers
#: (a ``Send`` each, or one per round); prepare, round, compact and finalize
#: are pure functions of the state, cheap to run again after a crash.
PACORE_MODEL_NODES = frozenset({"explore"})


def _parse_record(data: dict[str, Any], lineno: int, seen: set[str]) -> DatasetRecord:
    messages = data.get("messages")
    if messages is None and isinstance(data.get("conversation"), list):
        messages = data["conversation"]  # PaCoRe-Train records
    if messages is None:
        text = next((data[k] for k in _TEXT_KEYS if isinstance(data.get(k), str)), None)
        if text is not None:
            messages = [{"role": "user", "content": text}]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        where = "" if "messages" in data else " (or a 'question', 'problem' or 'prompt' text)"
        raise ValueError(f"'messages' must be a list of {{role, content}} objects{where}")
    normalize_conversation(messages)  # raises on an empty problem
    raw_id = data.get("id", f"req_{lineno - 1}")
    record_id = str(raw_id)
    if record_id in seen:
        raise ValueError(f"duplicate id {record_id!r}")
    seen.add(record_id)
    gt = data.get("ground_truth")
    return DatasetRecord(
        id=record_id, messages=tuple(messages), line=lineno, ground_truth=gt, raw=data
    )


def read_dataset(path: str | Path) -> tuple[list[DatasetRecord], list[InputError]]:
    """Parse a JSONL dataset; bad lines become :class:`InputError` values, not exceptions."""
    records: list[DatasetRecord] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    for item in read_lines(path):
        if isinstance(item, BadLine):
            errors.append(item)
            continue
        try:
            records.append(_parse_record(item.data, item.line, seen))
        except ValueError as exc:
            errors.append(BadLine(line=item.line, reason=str(exc)))
    return records, errors


def finished_ids(path: str | Path) -> set[str]:
    """Ids that already have a successful line in an output file (for resuming)."""
    if not Path(path).exists():
        return set()
    return {
        item.problem_id
        for item in read_results(path)
        if isinstance(item, ResultLine) and item.ok and not item.is_eval
    }


def result_line(record: DatasetRecord, result: PaCoReResult) -> dict[str, Any]:
    """One output line: the public pipeline's fields first, then ours."""
    final = result.final
    line: dict[str, Any] = {
        "request_id": record.id,
        "final_response": final.content,
        "final_reasoning_content": final.reasoning or "",
        "round_responses": [
            [{"content": t.content, "reasoning_content": t.reasoning or ""} for t in rnd]
            for rnd in result.rounds
        ],
        "id": record.id,
        "messages": list(record.messages),
    }
    if record.ground_truth is not None:
        line["ground_truth"] = record.ground_truth
    for key in ("category",):
        if key in record.raw:
            line[key] = record.raw[key]
    line.update(result.to_dict())
    line["problem_id"] = record.id
    return line


def _error_line(record: DatasetRecord, exc: BaseException) -> dict[str, Any]:
    return {
        "request_id": record.id,
        "id": record.id,
        "error": f"{type(exc).__name__}: {exc}",
        "messages": list(record.messages),
    }


async def run_dataset(
    graph: Any,
    records: Iterable[DatasetRecord],
    output: str | Path,
    *,
    max_problems_in_flight: int = 256,
    progress: bool = True,
    on_result: Callable[[DatasetRecord, PaCoReResult | None, BaseException | None], None]
    | None = None,
    progress_file: IO[str] | None = None,
    checkpointer: Any = None,
    durability: CheckpointDurability = DEFAULT_DURABILITY,
    model_nodes: Collection[str] | None = None,
) -> RunSummary:
    """Run every record not already finished in ``output``; append one line per problem.

    With a ``checkpointer`` each problem runs on its own thread of it, so a
    killed run resumes where it stopped (see :mod:`pacore_graph.runs.fanout`).
    ``model_nodes`` names the graph's nodes that call a model, when every
    other node is cheap (:data:`PACORE_MODEL_NODES` for a graph of
    ``build_pacore_graph``): only the checkpoints before them are written.
    ``None`` (the default, for any graph): every step's.
    """
    started = time.perf_counter()
    out_path = Path(output)
    private_dir(out_path.parent)
    done = finished_ids(out_path)
    todo = [r for r in records if r.id not in done]
    summary = RunSummary(total=len(todo) + len(done & {r.id for r in records}))
    summary.skipped = summary.total - len(todo)
    bar = progress_bar(
        len(todo), desc="problems", unit="problem", enabled=progress, file=progress_file
    )
    namespace = f"run:{out_path.resolve()}"
    with open_append(out_path) as sink:

        async def finished(
            job: Job, result: PaCoReResult | None, exc: BaseException | None
        ) -> None:
            record: DatasetRecord = job.payload
            if result is None:
                summary.failed += 1
                line = _error_line(record, exc or RuntimeError("no result"))
            else:
                summary.succeeded += 1
                summary.effective_ttc += result.effective_ttc
                line = result_line(record, result)
            sink.write(json.dumps(line, ensure_ascii=False) + "\n")
            sink.flush()
            if on_result:
                on_result(record, result, exc)
            bar.update(1)
            bar.set_postfix(failed=summary.failed, refresh=False)

        jobs = [
            Job(
                thread_id=f"{namespace}:{r.id}",
                state={"messages": list(r.messages), "problem_id": r.id},
                payload=r,
            )
            for r in todo
        ]
        try:
            await run_jobs(
                graph,
                jobs,
                finished,
                max_in_flight=max_problems_in_flight,
                checkpointer=checkpointer,
                durability=durability,
                model_nodes=model_nodes,
            )
        finally:
            bar.close()
    compact_results(out_path)
    summary.wall_s = time.perf_counter() - started
    return summary
