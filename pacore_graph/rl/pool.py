"""Cached message pools for the training-set recipe: where they come from.

A pool is, per problem, the compacted messages a synthesis prompt may show.
It comes from records in the released PaCoRe-Train format
(``conversation``, ``responses``, ``ground_truth``), read by
:func:`read_pacore_train`, or from this project's results files, where the
round-0 messages of every run of a problem (K samples of the model on the
bare problem) form its pool (:func:`pool_from_results`). :func:`load_pool`
takes either, file by file. What is built from a pool is in
:mod:`pacore_graph.rl.recipe`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.rl.episodes import ResultRun, iter_result_runs
from pacore_graph.runs.jsonl import BadLine, read_lines
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, compactor_from_name
from pacore_graph.values.records import Trajectory

__all__ = ["PoolProblem", "load_pool", "pool_from_results", "read_pacore_train", "read_records"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolProblem:
    """A problem with its cached message pool (messages already compacted)."""

    problem_id: str
    conversation: tuple[Mapping[str, Any], ...]
    messages: tuple[str, ...]
    ground_truth: Any = None
    category: str | None = None


def _response_trajectory(response: Any) -> Trajectory:
    if isinstance(response, str):
        return Trajectory(round=0, index=0, content=response)
    if isinstance(response, Mapping):
        content = response.get("content", response.get("response", ""))
        reasoning = response.get("reasoning_content", response.get("reasoning"))
        return Trajectory(
            round=0,
            index=0,
            content=content if isinstance(content, str) else "",
            reasoning=reasoning if isinstance(reasoning, str) else None,
        )
    raise ValueError(f"a response must be text or a message object, got {type(response).__name__}")


def read_records(path: Path) -> Iterable[tuple[int, Any]]:
    """Records of a JSON array file or a JSONL file, with their 1-based position."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"["):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: not a valid JSON array ({exc})") from None
        yield from enumerate(data, start=1)
        return
    # JSONL: the one reader; a training file with a bad line is refused, naming it.
    for item in read_lines(path):
        if isinstance(item, BadLine):
            raise ValueError(f"{path}:{item.line}: {item.reason}")
        yield item.line, item.data


def read_pacore_train(path: str | Path, *, compactor: str = DEFAULT_COMPACTOR) -> list[PoolProblem]:
    """Problems from PaCoRe-Train-format records (a JSON list or JSONL).

    Each record has ``conversation`` (or ``messages``), ``responses`` (the
    pool: text or ``{"content", "reasoning_content"}`` objects, compacted
    here with ``compactor`` so full trajectories and ready messages both
    work) and ``ground_truth``; ``id`` and ``category`` are optional.
    """
    compact = compactor_from_name(compactor)
    problems: list[PoolProblem] = []
    seen: set[str] = set()
    p = Path(path)
    for position, record in read_records(p):
        where = f"{p}:{position}"
        if not isinstance(record, Mapping):
            raise ValueError(f"{where}: expected a record object, got {type(record).__name__}")
        conversation = record.get("conversation", record.get("messages"))
        if not isinstance(conversation, list):
            raise ValueError(f"{where}: 'conversation' must be a list of chat messages")
        try:
            normalize_conversation(conversation)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        responses = record.get("responses", [])
        if not isinstance(responses, list):
            raise ValueError(f"{where}: 'responses' must be a list")
        messages = tuple(compact.compact(_response_trajectory(r)) for r in responses)
        problem_id = str(record.get("id", f"train_{position - 1}"))
        if problem_id in seen:
            raise ValueError(f"{where}: duplicate id {problem_id!r}")
        seen.add(problem_id)
        category = record.get("category")
        problems.append(
            PoolProblem(
                problem_id=problem_id,
                conversation=tuple(conversation),
                messages=tuple(m for m in messages if m),
                ground_truth=record.get("ground_truth"),
                category=str(category) if category is not None else None,
            )
        )
    return problems


def pool_from_results(paths: str | Path | Sequence[str | Path]) -> list[PoolProblem]:
    """Problems from ``pacore run`` / ``pacore eval`` results: round-0 messages form the pool.

    Round 0 of every method (PaCoRe, single, majority, refine) samples the
    model on the bare problem, which is what the paper's offline pool is;
    every successful run of a problem adds its round-0 messages. Lines that
    hold no run are ignored here (``pacore export-episodes`` reports them).
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    pools: dict[str, list[str]] = defaultdict(list)
    first: dict[str, ResultRun] = {}
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"results file {path} does not exist")
        for item in iter_result_runs(path):
            if not isinstance(item, ResultRun):
                continue
            first.setdefault(item.problem_id, item)
            pools[item.problem_id].extend(
                t.message for t in item.result.rounds[0] if not t.failed and t.message
            )
    return [
        PoolProblem(
            problem_id=pid,
            conversation=tuple(first[pid].conversation),
            messages=tuple(pools[pid]),
            ground_truth=first[pid].ground_truth,
            category=first[pid].category,
        )
        for pid in first
    ]


def _is_results_file(path: Path) -> bool:
    """A results file has runs (``rounds`` / ``result``); a pool file has ``responses``."""
    for _position, record in read_records(path):
        if isinstance(record, Mapping):
            return "responses" not in record and ("rounds" in record or "result" in record)
    return False


def load_pool(
    paths: str | Path | Sequence[str | Path], *, compactor: str = DEFAULT_COMPACTOR
) -> list[PoolProblem]:
    """Problems from PaCoRe-Train files or results files, told apart by their records."""
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    results = []
    problems: list[PoolProblem] = []
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist")
        if _is_results_file(path):
            results.append(path)
        else:
            problems.extend(read_pacore_train(path, compactor=compactor))
    if results:
        problems.extend(pool_from_results(results))
    ids = [p.problem_id for p in problems]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"problem id {dup!r} appears in more than one source file")
    return problems
