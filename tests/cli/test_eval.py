"""cli/eval: ``pacore eval`` (and ``pacore data``'s sets) through ``main``, over real HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from eval_support import (
    PNG_MAGIC,
    PROBLEMS,
    SYNTHESIS_START,
    locate,
    report,
    respond,
    result_lines,
)

from pacore_graph.cli import main
from pacore_graph.eval.datasets import write_jsonl
from pacore_graph.runs.runner import read_dataset
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

# --------------------------------------------------------------------------- CLI


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(respond).run_in_thread() as srv:
        yield srv


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "easy.jsonl"
    write_jsonl(PROBLEMS, path)
    return path


def eval_args(dataset: Path, methods: str, url: str, out: Path) -> list[str]:
    return [
        "eval",
        "--dataset",
        str(dataset),
        "--methods",
        methods,
        "--base-url",
        url,
        "--model",
        "scripted",
        "--out",
        str(out),
        "--no-progress",
        "--retries",
        "1",
    ]


OPERAND_RE = re.compile(r"What is (\d+) ([+\-×]) (\d+)\?")
MODEXP_RE = re.compile(r"remainder when (\d+)\^(\d+) .* divided by (\d+)\?")


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_every_file_an_eval_writes_is_private_whatever_the_umask(
    server: ScriptedServer, dataset: Path, tmp_path: Path, umask: int
) -> None:
    """Issue 31: results.jsonl (0644) held every problem's tests for others to read."""
    out = tmp_path / "deep" / "out"
    before = os.umask(umask)
    try:
        assert main(eval_args(dataset, "single", server.base_url, out)) == 0
    finally:
        os.umask(before)
    files = [p for p in out.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"results.jsonl", "report.json", "report.md", "scaling.png"} <= names, names
    assert any(n.endswith(".sqlite") or "checkpoint" in n for n in names), names
    for path in files:
        assert path.stat().st_mode & 0o777 == 0o600, (path, oct(path.stat().st_mode))
    for folder in (out, out.parent, *(p for p in out.rglob("*") if p.is_dir())):
        assert folder.stat().st_mode & 0o777 == 0o700, (folder, oct(folder.stat().st_mode))


def check_answer(question: str, answer: str) -> tuple[str, int, int]:
    """Recompute a generated problem's answer from its text; return (op, a, b)."""
    match = OPERAND_RE.search(question)
    if match:
        a, op, b = int(match[1]), match[2], int(match[3])
        expected = {"+": a + b, "-": a - b, "×": a * b}[op]
    else:
        found = MODEXP_RE.search(question)
        assert found, question
        a, b, mod = int(found[1]), int(found[2]), int(found[3])
        op, expected = "^", pow(a, b, mod)
    assert int(answer) == expected, question
    return op, a, b


def test_cli_data_arithmetic_is_reproducible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    for path, seed in ((first, "0"), (second, "0"), (other, "1")):
        assert main(["data", "arithmetic", "--n", "10", "--seed", seed, "--out", str(path)]) == 0
    assert f"wrote 10 arithmetic problems to {first}" in capsys.readouterr().out
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    lines = first.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10
    ops = []
    for text in lines:
        record = json.loads(text)
        assert set(record) >= {"id", "messages", "ground_truth"}
        op, a, b = check_answer(record["messages"][0]["content"], record["ground_truth"]["answer"])
        assert 10**11 <= a <= 10**13 and 10**11 <= b <= 10**13
        ops.append(op)
    assert set(ops) == {"+", "-", "×", "^"}
    assert len({json.loads(t)["id"] for t in lines}) == 10


def test_cli_data_easy_arithmetic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "easy.jsonl"
    assert main(["data", "easy-arithmetic", "--n", "6", "--seed", "3", "--out", str(path)]) == 0
    assert "wrote 6 easy-arithmetic problems" in capsys.readouterr().out
    records, errors = read_dataset(path)
    assert errors == [] and len(records) == 6
    for record in records:
        op, a, b = check_answer(str(record.messages[0]["content"]), record.ground_truth["answer"])
        assert op in "+-×" and 1 <= a <= 99 and 1 <= b <= 99


def test_cli_data_rejects_a_bad_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl"
    assert main(["data", "arithmetic", "--n", "0", "--out", str(path)]) == 2
    assert ">= 1" in capsys.readouterr().err
    assert not path.exists()


def test_cli_eval_prints_the_table_and_writes_the_files(
    server: ScriptedServer, dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    assert main(eval_args(dataset, "single,majority:3", server.base_url, out)) == 0
    printed = capsys.readouterr().out
    assert "# Evaluation report" in printed
    assert re.search(r"^\| single \| 50\.0% \(", printed, re.M)
    assert re.search(r"^\| majority:3 \| 0\.0% \(", printed, re.M)
    assert f"wrote {out / 'report.json'}" in printed
    assert server.request_count == 8
    for name in ("results.jsonl", "report.json", "report.md", "scaling.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "scaling.png").read_bytes().startswith(PNG_MAGIC)
    data = report(out)
    assert data["dataset"] == str(dataset)
    assert data["methods"]["single"]["accuracy"] == pytest.approx(0.5)
    assert data["methods"]["majority:3"]["mean_ttc"] == pytest.approx(30.0)


def test_cli_eval_samples(
    server: ScriptedServer, dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    assert main([*eval_args(dataset, "single", server.base_url, out), "--samples", "2"]) == 0
    assert "| single | 50.0% (" in capsys.readouterr().out
    assert len(result_lines(out)) == 8
    stats = report(out)["methods"]["single"]
    assert (stats["runs"], stats["samples"]) == (8, 2)


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ("single,bogus:3", "unknown method 'bogus:3'"),
        ("majority:0", r"\[1, 1024\]"),
        ("single,single", "listed twice"),
    ],
)
def test_cli_eval_bad_methods_exit_2(
    server: ScriptedServer,
    dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    methods: str,
    message: str,
) -> None:
    assert main(eval_args(dataset, methods, server.base_url, tmp_path / "eval")) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error:")
    assert re.search(message, err)
    assert server.request_count == 0


def test_cli_eval_missing_dataset_exits_2(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(eval_args(missing, "single", server.base_url, tmp_path / "eval")) == 2
    assert f"--dataset {missing}: no such file" in capsys.readouterr().err
    assert server.request_count == 0


def test_cli_eval_without_ground_truth_exits_2(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ungraded.jsonl"
    write_jsonl([{"id": "q", "messages": [{"role": "user", "content": "Hi?"}]}], path)
    assert main(eval_args(path, "single", server.base_url, tmp_path / "eval")) == 2
    assert "no record has a ground truth" in capsys.readouterr().err
    assert server.request_count == 0


# ------------------------------------------- the methods' own settings (issue 21)


def test_cli_eval_rsa_final_aggregate_adds_one_aggregation_and_is_reported(
    server: ScriptedServer, dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    voted, aggregated = tmp_path / "voted", tmp_path / "aggregated"
    assert main(eval_args(dataset, "rsa:2,2,2", server.base_url, voted)) == 0
    assert server.request_count == 4 * (1 + 2)  # per problem: one n=2 request, two aggregations
    argv = [
        *eval_args(dataset, "rsa:2,2,2", server.base_url, aggregated),
        "--rsa-final",
        "aggregate",
    ]
    assert main(argv) == 0
    assert server.request_count == 4 * (1 + 2) + 4 * (1 + 2 + 1)
    assert report(voted)["rsa_final"] == "majority"
    assert report(aggregated)["rsa_final"] == "aggregate"
    assert re.search(r"rsa_final\W+aggregate", (aggregated / "report.md").read_text("utf-8"))
    for line in result_lines(aggregated):
        assert [len(r) for r in line["result"]["rounds"]] == [2, 2, 1]
    capsys.readouterr()


def sure_by_sample(req: ScriptedRequest) -> ScriptedReply:
    """``respond``'s answers, explorer ``s`` of a problem as sure as ``[3, 1, 2, 4][s]``."""
    return dataclasses.replace(respond(req), confidence=(3.0, 1.0, 2.0, 4.0)[req.sample_index])


def test_cli_eval_reference_filter_applies_to_its_pacore_methods_and_is_reported(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    with ScriptedServer(sure_by_sample).run_in_thread() as srv:
        argv = eval_args(dataset, "pacore:4,single", srv.base_url, out)
        assert main([*argv, "--reference-filter", "confidence:0.5"]) == 0
        bodies = [r.body for r in srv.requests]
    syntheses = [b for b in bodies if b["messages"][-1]["content"].startswith(SYNTHESIS_START)]
    assert len(syntheses) == 4
    for body in syntheses:  # the sure half of each problem's four explorers: samples 0 and 3
        assert len(re.findall(r"Reference \d+:", body["messages"][-1]["content"])) == 2
    explorers = [b for b in bodies if b.get("n") == 4]
    assert len(explorers) == 4
    assert all(b.get("logprobs") is True for b in [*explorers, *syntheses])
    singles = [b for b in bodies if b.get("n", 1) == 1 and b not in syntheses]
    assert len(singles) == 4 and not any(b.get("logprobs") for b in singles)  # not PaCoRe
    data = report(out)
    assert data["reference_filter"] == "confidence:0.5" and "rsa_final" not in data
    capsys.readouterr()


@pytest.mark.parametrize(
    ("methods", "flags", "message"),
    [
        (
            "single",
            ["--rsa-final", "aggregate"],
            "--rsa-final applies to rsa:N,K,T, which --methods single",
        ),
        (
            "rsa:2,2,1",
            ["--reference-filter", "confidence:0.5"],
            "--reference-filter applies to PaCoRe",
        ),
        (
            "pacore:2",
            ["--reference-filter", "confidence:2"],
            "--reference-filter: the confidence share",
        ),
        ("deepconf:2", ["--deepconf-keep", "2"], "--deepconf-keep: "),
    ],
)
def test_cli_eval_method_settings_no_method_reads_are_one_line_and_send_nothing(
    server: ScriptedServer,
    dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    methods: str,
    flags: list[str],
    message: str,
) -> None:
    assert main([*eval_args(dataset, methods, server.base_url, tmp_path / "eval"), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error: ") and message in err, err
    assert err.strip().count("\n") == 0
    assert server.request_count == 0


# --------------------------------------------------------------------------- progress


SLOW_S = 7.0
PROGRESS_LINE = re.compile(r"^single: (\d+)/2 run\(s\) done, (\d+) s$")


async def slow_second_problem(req: ScriptedRequest) -> ScriptedReply:
    """:func:`respond`'s replies; problem 1's after ``SLOW_S`` s (an embedded model's pace)."""
    if locate(req.last_user) == 1:
        await asyncio.sleep(SLOW_S)
    return respond(req)


def test_cli_eval_shows_a_line_per_run_and_one_every_5_s_while_a_run_is_slow(
    dataset: Path, tmp_path: Path
) -> None:
    """Issue 31: no silence longer than 5 s (plus a tick) on a piped stderr while a run goes on.

    ``pacore eval`` in a subprocess, stderr a pipe: problem 0 answers at once,
    problem 1 after 7 s. Expected on stderr, each line stamped as it arrives:
    a line for the first finished run, a heartbeat 5-6 s later (the same
    count, the elapsed seconds), then the second run's line; stdout holds the
    report and no progress.
    """
    with ScriptedServer(slow_second_problem).run_in_thread() as server:
        args = eval_args(dataset, "single", server.base_url, tmp_path / "eval")
        args.remove("--no-progress")
        args += ["--limit", "2"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "pacore_graph.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stamped: list[tuple[float, str]] = []

        def read_stderr() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                stamped.append((time.monotonic(), line.rstrip("\n")))

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        assert proc.stdout is not None
        stdout = proc.stdout.read()  # stderr is the reader's alone: not communicate()
        proc.wait(timeout=120)
        reader.join(timeout=10)
    assert proc.returncode == 0, [text for _, text in stamped]
    progress = [(at, PROGRESS_LINE.match(text)) for at, text in stamped]
    lines = [(at, int(m[1]), int(m[2])) for at, m in progress if m is not None]
    assert [done for _, done, _ in lines] == [1, 1, 2], stamped
    (first, _, first_s), (beat, _, beat_s), (last, _, last_s) = lines
    assert 5.0 <= beat - first < 5.0 + 1.0 + 1.5, (beat - first, stamped)  # heartbeat + tick
    assert beat_s >= first_s + 5 and last_s >= SLOW_S - 1
    assert last - beat < SLOW_S - 5.0 + 1.5
    assert "# Evaluation report" in stdout and "run(s) done" not in stdout
