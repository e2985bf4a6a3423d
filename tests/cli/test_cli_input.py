"""Bad arguments and bad input at the command line (issue 11 items 8, 9, 13, 14).

Each case gets a one-line error and a documented exit status, never a
traceback, and nothing is sent to the model for input that is refused. The
model is a real scripted server on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_argv

from pacore_graph.cli import EXIT_SKIPPED_INPUT, EXIT_USAGE, build_parser, main
from pacore_graph.runs.jsonl import BadLine, read_lines
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
NO_SERVER = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


def reply(req: ScriptedRequest) -> ScriptedReply:
    return ScriptedReply(content=f"thinking so the answer is \\boxed{{{len(req.last_user)}}}")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(reply).run_in_thread() as srv:
        yield srv


def base(srv: ScriptedServer) -> list[str]:
    return ["--base-url", srv.base_url, "--model", "scripted", "--no-progress"]


def one_line_error(capsys: Any) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert err.count("\n") == 0, f"expected one line, got: {err!r}"
    assert err.startswith("pacore: error: ")
    return err


def record(i: int, text: str | None = None) -> str:
    content = text if text is not None else f"Question {i}?"
    return json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": content}]})


# --------------------------------------------------------------------------- refused arguments


@pytest.mark.parametrize("rounds", ["", "4,,2", ","])
def test_empty_round_widths_are_refused(rounds: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            ["run", "Q", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--rounds", rounds]
        )
    assert info.value.code == EXIT_USAGE
    assert "--rounds takes comma-separated positive integers" in capsys.readouterr().err


def test_a_question_that_is_not_utf8_is_refused_before_sending(
    server: ScriptedServer, capsys: Any
) -> None:
    # What Python makes of a non-UTF-8 argv byte (surrogateescape).
    question = b"caf\xe9 au lait?".decode("utf-8", "surrogateescape")
    assert main(["run", question, *base(server)]) == EXIT_USAGE
    assert "not valid UTF-8" in one_line_error(capsys)
    assert server.request_count == 0


def test_a_non_utf8_question_from_a_real_shell_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            "run",
            b"caf\xe9",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        capture_output=True,
        cwd=REPO_ROOT,
        timeout=120,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )
    assert proc.returncode == EXIT_USAGE
    assert b"not valid UTF-8" in proc.stderr and b"Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("make_args", "expected"),
    [
        (lambda d: ["Q", "--template", str(d / "missing.j2")], "--template"),
        (lambda d: ["Q", "--template", str(d)], "is a directory"),
        (lambda d: ["--input", str(d), "--output", str(d / "o.jsonl")], "is a directory"),
        (lambda d: ["--input", str(d / "in.jsonl"), "--output", str(d)], "is a directory"),
        (
            lambda d: ["--input", str(d / "in.jsonl"), "--output", str(d / "in.jsonl" / "o")],
            "cannot create",
        ),
        (lambda d: ["Q", "--output", str(d)], "is a directory"),
    ],
    ids=[
        "template-missing",
        "template-dir",
        "input-dir",
        "output-dir",
        "output-under-file",
        "question-output-dir",
    ],
)
def test_unusable_files_are_one_line_errors(
    make_args: Any, expected: str, server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    (tmp_path / "in.jsonl").write_text(record(0) + "\n", encoding="utf-8")
    assert main(["run", *make_args(tmp_path), *base(server)]) == EXIT_USAGE
    assert expected in one_line_error(capsys)
    assert server.request_count == 0


def test_eval_out_that_is_a_file_is_refused(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(record(0) + "\n", encoding="utf-8")
    out = tmp_path / "report"
    out.write_text("not a folder", encoding="utf-8")
    code = main(["eval", "--dataset", str(data), "--out", str(out), *base(server)])
    assert code == EXIT_USAGE
    assert "is a file" in one_line_error(capsys)
    assert out.read_text(encoding="utf-8") == "not a folder"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:secret@127.0.0.1:9/v1", "credentials"),
        ("http://127.0.0.1:99999/v1", "--base-url"),
        ("ftp://127.0.0.1/v1", "http(s) URL"),
    ],
)
def test_bad_base_urls_are_one_line_errors(url: str, expected: str, capsys: Any) -> None:
    assert main(["run", "Q", "--base-url", url, "--model", "m", "--no-progress"]) == EXIT_USAGE
    err = one_line_error(capsys)
    assert expected in err
    assert "secret" not in err


# ------------------------------------------------------------------ a question with --output


def test_question_with_output_writes_the_result_line(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "sub" / "answer.jsonl"
    argv = ["run", "What is 2+2?", "--rounds", "2", "--json", "--output", str(out)]
    assert main([*argv, *base(server)]) == 0
    printed = json.loads(capsys.readouterr().out)
    (line,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert line["answer"] == printed["answer"]
    assert line["messages"] == [{"role": "user", "content": "What is 2+2?"}]
    assert [len(r) for r in line["rounds"]] == [2, 1]
    # The file is a results file like any other: `pacore graph` reads it.
    png = tmp_path / "g.png"
    assert main(["graph", str(out), "--id", line["request_id"], "--out", str(png)]) == 0
    assert png.stat().st_size > 0


# ------------------------------------------------------------------ datasets with bad lines


def test_a_dataset_with_bad_lines_runs_the_rest_and_exits_3(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    data = tmp_path / "in.jsonl"
    lines = [
        record(1).encode(),
        b'{"id": "p2", "messages": [{"role": "user", "content": "caf\xe9"}]}',  # Latin-1 byte
        record(3).encode(),
        b'{"id": "p4", "messages": [{"role": "user", "content": "x\\ud800y"}]}',  # lone surrogate
        b"not json",
        record(6).encode(),
    ]
    data.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    code = main(run_argv(data, out, "2", "--json", *base(server)))
    captured = capsys.readouterr()
    assert code == EXIT_SKIPPED_INPUT
    assert "Traceback" not in captured.err
    assert f"{data}:line 2: not UTF-8 text (byte 0xe9" in captured.err
    assert f"{data}:line 4: not valid text" in captured.err
    assert f"{data}:line 5: not valid JSON" in captured.err
    report = json.loads(captured.out)
    assert (report["succeeded"], report["input_errors"]) == (3, 3)
    done = sorted(json.loads(x)["request_id"] for x in out.read_text().splitlines())
    assert done == ["p1", "p3", "p6"]
    # No request ever carried the bad text.
    assert all("\\ud800" not in json.dumps(r.body) for r in server.requests)


def test_exit_statuses_are_documented() -> None:
    text = build_parser().format_help()
    assert "exit status" in text and "3 done, but some input lines were skipped" in text
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert "exit status" in readme.lower() and "| 3 |" in readme


def test_one_reader_reports_every_kind_of_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n\n\xff\xfe\n[1]\n{"s": "\\udc00"}\n{"cut": \n')
    items = list(read_lines(path))
    assert [i.line for i in items] == [1, 3, 4, 5, 6]
    bad = [i for i in items if isinstance(i, BadLine)]
    assert [b.line for b in bad] == [3, 4, 5, 6]
    assert "byte 0xff at column 1" in bad[0].reason
    assert "expected a JSON object" in bad[1].reason
    assert "lone surrogate" in bad[2].reason
    assert "not valid JSON" in bad[3].reason
    assert str(bad[0]).startswith("line 3: ")


# --------------------------------------------------------------------------- resume, export, data


def test_a_resumed_run_leaves_one_line_per_id(tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(record(i) + "\n" for i in range(4)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    args = run_argv(
        data, out, "2", "--retries", "1", "--no-progress", "--no-batch", model="scripted"
    )

    def down_for_question_2(req: ScriptedRequest) -> int | None:
        return 500 if "Question 2?" in req.last_user else None

    with ScriptedServer(reply, fail_when=down_for_question_2).run_in_thread() as srv:
        assert main([*args, "--base-url", srv.base_url]) == 1
    first = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["request_id"] for x in first if "error" in x] == ["p2"]
    with ScriptedServer(reply).run_in_thread() as srv:
        assert main([*args, "--base-url", srv.base_url]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x["request_id"] for x in lines) == ["p0", "p1", "p2", "p3"]
    assert not any("error" in x for x in lines)
    capsys.readouterr()


@pytest.fixture
def results(tmp_path: Path, server: ScriptedServer) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(record(i) + "\n" for i in range(3)), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    code = main(["run", "--input", str(data), "--output", str(out), "--rounds", "2", *base(server)])
    assert code == 0
    return out


def test_export_episodes_given_one_file_twice_exports_each_episode_once(
    results: Path, tmp_path: Path, capsys: Any
) -> None:
    once, twice = tmp_path / "once", tmp_path / "twice"
    assert main(["export-episodes", str(results), "--out", str(once)]) == 0
    copy = tmp_path / "copy" / "results.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(results.read_bytes())
    argv = ["export-episodes", str(results), str(results), str(copy), "--out", str(twice)]
    assert main(argv) == 0
    rows_once = (once / "episodes.jsonl").read_text().splitlines()
    rows_twice = (twice / "episodes.jsonl").read_text().splitlines()
    assert len(rows_once) == 3 * (2 + 1)
    assert rows_twice == rows_once
    report = json.loads((twice / "export_report.json").read_text())
    assert report["duplicate_runs"] == 6
    capsys.readouterr()


def test_export_episodes_out_file_name_writes_a_file(
    results: Path, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "eps" / "x.jsonl"
    assert main(["export-episodes", str(results), "--out", str(out)]) == 0
    assert out.is_file()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 3 * (2 + 1)
    assert (tmp_path / "eps" / "x.export_report.json").is_file()
    assert main(["export-episodes", str(results), "--out", str(out), "--format", "parquet"]) == 2
    assert "--format is parquet" in one_line_error(capsys)


def test_pacore_data_out_that_is_a_directory_is_refused(tmp_path: Path, capsys: Any) -> None:
    assert main(["data", "easy-arithmetic", "--n", "3", "--out", str(tmp_path)]) == EXIT_USAGE
    assert "is a directory" in one_line_error(capsys)


def test_pacore_data_streams_with_bounded_memory(tmp_path: Path) -> None:
    """The generator writes as it goes: peak memory must not grow with --n."""

    def peak_kib(n: int) -> int:
        out = tmp_path / f"d{n}.jsonl"
        code = (
            "import resource, sys\n"
            "from pacore_graph.cli import main\n"
            f"assert main(['data', 'easy-arithmetic', '--n', '{n}', '--out', r'{out}']) == 0\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
        )
        assert sum(1 for _ in out.open("rb")) == n
        return int(proc.stdout.split()[-1])

    small, large = peak_kib(1_000), peak_kib(200_000)
    # 200k problems held as dicts take well over 150 MiB; streamed, the peak stays put.
    assert large - small < 30 * 1024, (small, large)
