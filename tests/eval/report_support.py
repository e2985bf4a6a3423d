"""Scripted eval result lines whose statistics can be worked out by hand (report and plot tests)."""

from __future__ import annotations

from typing import Any

TOL = 1e-9
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
META = {"dataset": "easy.jsonl", "model": "smollm2-135m", "grader": "math"}
STAT_KEYS = {
    "accuracy",
    "ci95",
    "mean_ttc",
    "runs",
    "problems",
    "samples",
    "failures",
    "failed_trajectories",
    "truncations",
    "unparsed",
    "mean_wall_s",
    "wall_s",
    "family",
}


def run(method: str, problem: str, sample: int, score: float, **extra: Any) -> dict[str, Any]:
    """One results.jsonl line with neutral defaults (what a clean run writes)."""
    line: dict[str, Any] = {
        "method": method,
        "family": method.split(":")[0],
        "problem_id": problem,
        "sample": sample,
        "score": score,
        "parsed": True,
        "extracted": "1",
        "expected": "1",
        "effective_ttc": 0,
        "trajectories": 1,
        "failed_trajectories": 0,
        "truncations": 0,
        "wall_s": 0.0,
        "error": None,
        "some_future_key": {"ignored": True},
    }
    line.update(extra)
    return line


M, S, P = "majority:4", "single", "pacore:low"

# The order matters: majority:4 is seen first, then single, then pacore:low.
LINES: list[dict[str, Any]] = [
    # majority:4, 2 samples over 4 problems.
    run(M, "e0", 0, 1.0, effective_ttc=400, trajectories=5, wall_s=2.0),
    run(M, "e0", 1, 1.0, effective_ttc=420, failed_trajectories=1, truncations=1, wall_s=2.2),
    # A failed run: counted as a failure, scores 0, its parsed=false is NOT "unparsed".
    run(M, "e1", 0, 0.0, parsed=False, error="HTTP 500", failed_trajectories=5, wall_s=0.5),
    run(M, "e1", 1, 1.0, effective_ttc=380, wall_s=1.8),
    # Stale line, superseded by the resumed run below (last wins).
    run(M, "e2", 0, 1.0, effective_ttc=500, truncations=7, wall_s=9.9),
    run(S, "e0", 0, 1.0, effective_ttc=100, wall_s=1.0),
    run(S, "e1", 0, 0.0, parsed=False, effective_ttc=120, wall_s=1.2),  # unparsed
    run(S, "e2", 0, 1.0, effective_ttc=90, truncations=1, wall_s=0.9),
    run(S, "e3", 0, 1.0, effective_ttc=110, wall_s=1.1),
    run(M, "e2", 1, 1.0, effective_ttc=460, wall_s=2.3),
    run(M, "e3", 0, 1.0, effective_ttc=410, wall_s=2.0),
    run(M, "e3", 1, 1.0, effective_ttc=390, wall_s=1.9),
    # The resumed run of (majority:4, e2, 0): a wrong answer.
    run(M, "e2", 0, 0.0, effective_ttc=440, truncations=1, wall_s=2.1),
    # pacore:low, 3 samples over 2 problems.
    run(P, "e0", 0, 1.0, effective_ttc=1000, trajectories=5, wall_s=5.0),
    run(P, "e0", 1, 1.0, effective_ttc=1200, trajectories=5, wall_s=6.0),
    run(P, "e0", 2, 0.0, effective_ttc=1100, trajectories=5, wall_s=5.5),
    run(P, "e1", 0, 1.0, effective_ttc=900, trajectories=5, wall_s=4.5),
    run(P, "e1", 1, 0.0, effective_ttc=1300, trajectories=5, truncations=2, wall_s=6.5),
    run(P, "e1", 2, 0.0, effective_ttc=1500, trajectories=5, wall_s=7.5),
]
WALL = {S: 10.0, M: 30.5}
