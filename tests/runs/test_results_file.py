"""The results-file model: run lines, eval lines, and one line per run after a resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pacore_graph.runs.jsonl import BadLine
from pacore_graph.runs.results_file import ResultLine, compact_results, latest_lines, read_results

ROUNDS: dict[str, Any] = {"rounds": [[{"round": 0, "index": 0, "content": "x", "message": "x"}]]}


def run_line(pid: str, error: str | None = None, answer: str = "a") -> dict[str, Any]:
    if error:
        return {"request_id": pid, "id": pid, "error": error, "messages": []}
    return {"request_id": pid, "id": pid, "answer": answer, **ROUNDS}


def eval_line(method: str, pid: str, sample: int, error: str | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {"method": method, "problem_id": pid, "sample": sample}
    if error:
        line["error"] = error
    else:
        line["result"] = {"answer": "a", **ROUNDS}
    return line


def write(path: Path, lines: list[Any]) -> None:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )


def test_read_results_tells_run_and_eval_lines_apart(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write(path, [run_line("p1"), eval_line("single", "p1", 2), '{"cut": ', {"x": 1}])
    items = list(read_results(path))
    run, ev, cut, stray = items
    assert isinstance(run, ResultLine) and run.key == (None, "p1", 0) and not run.is_eval
    assert isinstance(ev, ResultLine) and ev.key == ("single", "p1", 2) and ev.is_eval
    assert run.result().answer == "a" and ev.result().answer == "a"
    assert isinstance(cut, BadLine) and cut.line == 3
    assert isinstance(stray, BadLine) and "not a results line" in stray.reason


def test_compact_keeps_the_latest_success_per_run(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write(
        path,
        [
            run_line("p1", error="boom"),
            run_line("p2", answer="first"),
            '{"request_id": "p3", "cut',
            run_line("p1", error="boom again"),
            run_line("p3"),
            run_line("p1", answer="fixed"),
            run_line("p2", error="a later failure does not replace a success"),
            eval_line("m", "p1", 0, error="x"),
            eval_line("m", "p1", 0),
        ],
    )
    assert compact_results(path) == (9, 4)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(x.get("request_id"), x.get("method")) for x in lines] == [
        ("p2", None),
        ("p3", None),
        ("p1", None),
        (None, "m"),
    ]
    assert lines[0]["answer"] == "first" and lines[2]["answer"] == "fixed"
    assert not any("error" in x for x in lines)


def test_compact_leaves_a_clean_file_alone_and_keeps_a_lone_failure(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write(path, [run_line("p1"), run_line("p2", error="still failing")])
    before = path.stat().st_ino
    assert compact_results(path) == (2, 2)
    assert path.stat().st_ino == before, "nothing to drop: the file is not rewritten"
    assert compact_results(tmp_path / "missing.jsonl") == (0, 0)


def test_latest_lines_prefers_success_then_recency(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write(path, [run_line("p", error="e1"), run_line("p", error="e2")])
    lines = [x for x in read_results(path) if isinstance(x, ResultLine)]
    (kept,) = latest_lines(lines)
    assert kept.error == "e2"
