"""Records and results files the message-graph tests share.

Hand-made records whose references are chosen so that an edge built from the
wrong side, in the wrong order or to a failed call would show.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import networkx as nx

from pacore_graph.values.records import PaCoReResult, Trajectory


def boxed(answer: str) -> str:
    return f"<think>scratch \\boxed{{0}}</think>So the answer is \\boxed{{{answer}}}."


def traj(r: int, i: int, answer: str | None, refs: tuple[int, ...] = (), **kw: Any) -> Trajectory:
    """A trajectory answering ``answer``; ``None`` makes it a failed call."""
    if answer is None:
        return Trajectory(round=r, index=i, error="HTTP 500: boom", references=refs, **kw)
    content = boxed(answer)
    return Trajectory(
        round=r,
        index=i,
        content=content,
        message=content.split("</think>")[1],
        finish_reason=kw.pop("finish_reason", "stop"),
        completion_tokens=kw.pop("completion_tokens", 10 * (r + 1) + i),
        prompt_tokens=5,
        references=refs,
        **kw,
    )


def scripted() -> PaCoReResult:
    """Rounds 4, 2, 1; r0.1 failed; references in deliberately unsorted prompt order."""
    rounds = (
        (
            traj(0, 0, "42"),
            traj(0, 1, None),
            traj(0, 2, "41"),
            traj(0, 3, "42", finish_reason="length"),
        ),
        (traj(1, 0, "42", (3, 0, 2)), traj(1, 1, "7", (2, 3, 0))),
        (traj(2, 0, "42", (1, 0)),),
    )
    final = rounds[-1][0]
    return PaCoReResult(
        answer=final.message or "",
        reasoning=None,
        rounds=rounds,
        schedule=(4, 2, 1),
        problem_id="p1",
        model="fake",
        preset="low",
    )


def wide(widths: tuple[int, ...], answers: int = 5) -> PaCoReResult:
    """Every trajectory reads every message of the previous round, in reverse order."""
    rounds = []
    for r, k in enumerate(widths):
        refs = tuple(reversed(range(widths[r - 1]))) if r else ()
        rounds.append(tuple(traj(r, i, str((i * 7 + r) % answers), refs) for i in range(k)))
    return PaCoReResult(
        answer=rounds[-1][0].message or "",
        reasoning=None,
        rounds=tuple(rounds),
        schedule=widths,
        problem_id="wide",
    )


def expected_edges(result: PaCoReResult) -> set[tuple[str, str, int]]:
    return {
        (f"r{t.round - 1}.{ref}", t.id, pos)
        for t in result.trajectories
        for pos, ref in enumerate(t.references, start=1)
    }


def edge_set(g: nx.DiGraph) -> set[tuple[str, str, int]]:
    return {(u, v, d["position"]) for u, v, d in g.edges(data=True)}


def write_lines(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


def run_line(record_id: str, result: PaCoReResult, **extra: Any) -> dict[str, Any]:
    """A line shaped like ``pacore run``'s results.jsonl."""
    return {
        "request_id": record_id,
        "final_response": "...",
        "id": record_id,
        **extra,
        **result.to_dict(),
        "problem_id": record_id,
    }


def eval_line(method: str, problem_id: str, sample: int, result: PaCoReResult | None) -> dict:
    """A line shaped like ``pacore eval``'s results.jsonl (``None``: a failed run)."""
    line: dict[str, Any] = {
        "method": method,
        "family": method.split(":")[0],
        "problem_id": problem_id,
        "sample": sample,
        "ground_truth": {"answer": "42"},
        "error": None if result else "RoundFailedError: round 0: all 4 explorer calls failed",
    }
    if result is not None:
        line["result"] = result.to_dict()
    return line


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
