"""``pacore eval --dataset SPEC`` and ``pacore run --input SPEC`` with benchmarks, end to end.

Real HTTP against the scripted server, which answers by input: for a
MathArena problem "Compute A+B." it boxes A+B when A is odd and A+B+1
otherwise, so the expected accuracy is known from the fixture alone.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_fixtures import go_offline, hle_row, lcb_row, matharena_row, write_parquet

from pacore_graph.cli import main
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

SUM = re.compile(r"Compute (\d+)\+(\d+)\.")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    go_offline(monkeypatch)


def respond(req: ScriptedRequest) -> ScriptedReply:
    match = SUM.search(req.last_user)
    if match is None:  # a code problem: any fenced answer
        return ScriptedReply(content="```python\nprint(sum(map(int, input().split())))\n```")
    a, b = int(match[1]), int(match[2])
    return ScriptedReply(content=f"\\boxed{{{a + b if a % 2 else a + b + 1}}}", completion_tokens=7)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(respond).run_in_thread() as srv:
        yield srv


def base(server: ScriptedServer) -> list[str]:
    return ["--base-url", server.base_url, "--model", "scripted", "--no-progress", "--retries", "1"]


def one_line_error(capsys: Any) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.count("\n") == 0, err
    assert err.startswith("pacore: error: ")
    return err


def test_eval_on_a_named_benchmark_copy(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    rows = [matharena_row(i, f"Compute {i}+{i + 1}.", str(2 * i + 1)) for i in range(1, 5)]
    path = write_parquet(rows, tmp_path / "hmmt.parquet")
    out = tmp_path / "eval"
    argv = ["eval", "--dataset", f"hmmt25:{path}", "--methods", "single", "--out", str(out)]
    assert main([*argv, *base(server)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["methods"]["single"]["accuracy"] == 0.5  # problems 1 and 3 (odd A)
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(line["problem_id"] for line in lines) == [f"hmmt25-{i}" for i in range(1, 5)]
    assert {line["category"] for line in lines} == {"math"}
    assert report["dataset"] == f"hmmt25:{path}"


def test_the_report_counts_what_the_benchmark_left_out(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    rows = [
        hle_row("t1", "Compute 3+4.", "7"),
        hle_row("i1", "Compute 1+1 from the figure.", "2", image="data:image/png;base64,AA"),
    ]
    path = write_parquet(rows, tmp_path / "hle.parquet")
    out = tmp_path / "eval"
    argv = ["eval", "--dataset", f"hle:{path}", "--methods", "single", "--grader", "exact"]
    assert main([*argv, "--out", str(out), *base(server)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert (report["benchmark"], report["skipped"]) == ("hle", {"image question": 1})
    assert report["methods"]["single"]["accuracy"] == 1.0
    assert f"{path}: skipped 1 image question(s)" in capsys.readouterr().err


def test_run_on_livecodebench_within_dates(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    tests = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    rows = [
        lcb_row("old", public=tests, private=tests, contest_date="2024-07-01T00:00:00"),
        lcb_row("new", public=tests, private=tests, contest_date="2024-10-01T00:00:00"),
    ]
    path = write_parquet(rows, tmp_path / "lcb.parquet")
    out = tmp_path / "out.jsonl"
    argv = ["run", "--input", f"livecodebench:{path}", "--output", str(out), "--rounds", "2"]
    code = main([*argv, "--since", "2024-08-01", "--until", "2025-05-31", *base(server)])
    assert code == 0
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["id"] == "new" and line["category"] == "code"
    assert line["ground_truth"]["code_tests"]["tests"][1]["public"] is False
    assert "```python" in line["final_response"]
    assert f"{path}: 1 row(s) outside --since/--until left out" in capsys.readouterr().err


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_dataset_is_refused_before_any_call(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    marker = tmp_path / "pwned"
    evil = base64.b64encode(zlib.compress(pickle.dumps(_Touch(marker)))).decode()
    rows = [lcb_row("evil", public=[], private=[], private_text=evil)]
    rows[0]["public_test_cases"] = json.dumps(
        [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    )
    path = write_parquet(rows, tmp_path / "evil.parquet")
    argv = ["eval", "--dataset", f"livecodebench:{path}", "--out", str(tmp_path / "e")]
    assert main([*argv, *base(server)]) == 2
    err = one_line_error(capsys)
    assert f"--dataset {path}: row 1 (id evil): " in err and "refused" in err
    assert not marker.exists()
    assert server.request_count == 0
    assert not (tmp_path / "e" / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["eval", "--dataset", "hmmt24", "--out", "{tmp}/e"],
            "not a file, a hub id or a benchmark name",
        ),
        (
            ["eval", "--dataset", "hmmt25:{tmp}/gone.parquet", "--out", "{tmp}/e"],
            "no such file or folder",
        ),
        (
            ["eval", "--dataset", "{tmp}/d.jsonl", "--since", "2024-01-01", "--out", "{tmp}/e"],
            "dated benchmark only",
        ),
        (
            [
                "eval",
                "--dataset",
                "hmmt25:{tmp}/d.parquet",
                "--until",
                "2024-01-01",
                "--out",
                "{tmp}/e",
            ],
            "hmmt25 has not",
        ),
        (["run", "Q", "--since", "2024-01-01"], "give --input"),
        (["run", "--input", "hf:a", "--output", "{tmp}/o.jsonl"], "expected hf:OWNER/NAME"),
    ],
    ids=[
        "unknown-name",
        "missing-copy",
        "dates-on-jsonl",
        "dates-on-undated",
        "dates-without-input",
        "bad-hub-id",
    ],
)
def test_bad_dataset_arguments_are_one_line_errors(
    server: ScriptedServer, tmp_path: Path, capsys: Any, argv: list[str], message: str
) -> None:
    (tmp_path / "d.jsonl").write_text('{"id": "a", "question": "Q?", "ground_truth": "1"}\n')
    write_parquet([matharena_row(1, "Q", "1")], tmp_path / "d.parquet")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main([*args, *base(server)]) == 2
    assert message in one_line_error(capsys)
    assert server.request_count == 0


def test_a_date_that_is_not_a_date(capsys: Any) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", "--dataset", "livecodebench", "--out", "x", "--since", "2024-13-01"])
    assert info.value.code == 2
    assert "expected a date YYYY-MM-DD, got '2024-13-01'" in capsys.readouterr().err
