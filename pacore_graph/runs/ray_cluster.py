"""A dataset run over a Ray cluster: each Ray task runs the same graph on a share.

Why: one ``pacore`` process keeps a fleet busy up to a ceiling
(``docs/scale.md``); past it, several orchestrator processes share the
problems. Ray schedules them (``--ray ADDRESS`` joins a cluster, ``--ray
local`` starts one on this machine with ``--ray-workers N`` worker slots)
and re-runs a task whose worker died, rather than a home-made pool.

The problems are split into ``N`` shares by a stable hash of their id (so
the same command after a crash assigns each problem to the same share).
Share ``k`` is a dataset run as today, on its own files beside the output:
``OUTPUT.ray-k-of-N.input.jsonl`` (its problems), ``OUTPUT.ray-k-of-N.jsonl``
(its results, one line per id) and that file's SQLite checkpoints (or the
``--checkpoint`` store given). A task whose worker is killed is run again
by Ray: it skips the ids its results file holds and resumes the others
from their checkpoints, so finished samples are not asked again. When every
share is done their lines are appended to the output, which is compacted
to one line per id, and the share files are removed. On a cluster of
several machines the output's folder must be visible to every node (a
shared filesystem), or pass ``--checkpoint postgresql://...``.

What runs in a task is the caller's (the CLI passes its own dataset run):
this module only plans, schedules and merges.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.runs.atomic import write_lines_atomic
from pacore_graph.runs.filenames import RUN_CHECKPOINT_SUFFIX
from pacore_graph.runs.results_file import compact_results
from pacore_graph.runs.runner import DatasetRecord

__all__ = [
    "LOCAL",
    "MAX_TASK_RETRIES",
    "Share",
    "merge_shares",
    "plan_shares",
    "run_shares",
    "shard_of",
]

#: ``--ray local``: start a Ray cluster on this machine for the run.
LOCAL = "local"

#: How many times Ray runs a share again whose worker died (each run resumes it).
MAX_TASK_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Share:
    """One Ray task's problems and files (see the module docstring)."""

    index: int
    count: int
    input: Path
    output: Path

    @property
    def checkpoint(self) -> Path:
        """The share's default SQLite checkpoint file (beside its results)."""
        return self.output.with_name(self.output.name + RUN_CHECKPOINT_SUFFIX)


def shard_of(record_id: str, count: int) -> int:
    """The share a problem belongs to: stable across runs and machines (CRC-32 of its id)."""
    return zlib.crc32(record_id.encode("utf-8")) % count


def _files(output: Path, index: int, count: int) -> tuple[Path, Path]:
    stem = f"{output.name}.ray-{index}-of-{count}"
    return output.with_name(stem + ".input.jsonl"), output.with_name(stem + ".jsonl")


def _line(record: DatasetRecord) -> str:
    data = dict(record.raw) if record.raw else {}
    data["id"] = record.id
    data["messages"] = [dict(m) for m in record.messages]
    for key in ("question", "problem", "prompt"):
        data.pop(key, None)  # the messages say it
    if record.ground_truth is not None:
        data["ground_truth"] = record.ground_truth
    return json.dumps(data, ensure_ascii=False)


def plan_shares(records: Iterable[DatasetRecord], output: Path, count: int) -> list[Share]:
    """Write each share's problems to its input file; the shares that have problems."""
    if count < 1:
        raise ValueError(f"--ray-workers must be >= 1, got {count}")
    groups: list[list[DatasetRecord]] = [[] for _ in range(count)]
    for record in records:
        groups[shard_of(record.id, count)].append(record)
    shares = []
    for index, group in enumerate(groups):
        if not group:
            continue
        source, results = _files(output, index, count)
        write_lines_atomic(source, [_line(r) for r in group])
        shares.append(Share(index, count, source, results))
    return shares


def run_shares(
    shares: Sequence[Share],
    work: Callable[[Share], int],
    *,
    address: str,
    workers: int,
) -> list[int]:
    """Run ``work(share)`` for every share as a Ray task; their return values, in order.

    ``address`` is a Ray cluster's address (``auto``, ``ray://host:10001``,
    ``host:6379``) or :data:`LOCAL` to start one here with ``workers`` CPU
    slots. Each task takes one slot and is run again (up to
    :data:`MAX_TASK_RETRIES` times) when its worker process dies.
    """
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs Ray: pip install 'pacore-graph[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        quiet: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address == LOCAL:
            ray.init(num_cpus=workers, **quiet)
        else:
            try:
                ray.init(address=address, **quiet)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ValueError(f"--ray {address}: cannot join the Ray cluster ({text})") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=MAX_TASK_RETRIES, retry_exceptions=False)(_call)
        refs = [task.remote(work, share) for share in shares]
        return [int(code) for code in ray.get(refs)]
    finally:
        if started_here:
            ray.shutdown()


def _call(work: Callable[[Share], int], share: Share) -> int:
    """What a Ray task runs (a module-level function, so workers import it by name)."""
    return work(share)


def merge_shares(output: Path, shares: Sequence[Share], *, keep_checkpoints: bool = False) -> None:
    """Append the shares' result lines to ``output``, compact it, remove the share files."""
    with open(output, "ab") as sink:
        for share in shares:
            if share.output.is_file():
                data = share.output.read_bytes()
                if data and not data.endswith(b"\n"):
                    data += b"\n"  # a line cut by a crash: compaction drops it
                sink.write(data)
        sink.flush()
        os.fsync(sink.fileno())
    compact_results(output)
    for share in shares:
        leftovers: list[Path] = [share.input, share.output]
        if not keep_checkpoints:
            leftovers += [share.checkpoint, *_sqlite_sidecars(share.checkpoint)]
        for path in leftovers:
            path.unlink(missing_ok=True)


def _sqlite_sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
