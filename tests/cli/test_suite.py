"""``pacore eval --suite table1``: the same known table as the library, from the command line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from table1_support import fixtures, judge_reply, model_reply, parse_table

from pacore_graph.cli import EXIT_OK, EXIT_USAGE, main
from pacore_graph.testing.scripted_server import ScriptedServer


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with (
        ScriptedServer(model_reply, model="pacore-8b").run_in_thread() as model,
        ScriptedServer(judge_reply, model="judge").run_in_thread() as judge,
    ):
        yield model, judge


def suite_argv(
    model: ScriptedServer, judge: ScriptedServer, data: dict[str, str], out: Path
) -> list[str]:
    argv = ["eval", "--suite", "table1", "--out", str(out), "--no-progress"]
    argv += ["--base-url", model.base_url, "--model", "pacore-8b"]
    argv += ["--judge-base-url", judge.base_url, "--judge-model", "judge"]
    for key, spec in data.items():
        argv += ["--suite-dataset", f"{key}={spec}"]
    return argv


def test_suite_table1_from_the_command_line(
    servers: tuple[ScriptedServer, ScriptedServer], tmp_path: Path, capsys: Any
) -> None:
    model, judge = servers
    out = tmp_path / "out"
    code = main(suite_argv(model, judge, fixtures(tmp_path / "data"), out))
    assert code == EXIT_OK, capsys.readouterr().err
    rows = parse_table((out / "table1.md").read_text())
    assert rows[("HMMT 2025", "majority:5")][:4] == ["2", "50.0", "[9.5, 90.5]", "200"]
    assert rows[("LiveCodeBench 2408-2505", "pacore:high")][1] == "100.0"
    assert rows[("HLE (text)", "pacore:low")][1] == "100.0"
    assert rows[("MultiChallenge", "single")][1] == "0.0"
    assert (out / "hle" / "judge-cache.jsonl").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dataset", "x.jsonl"], "--suite-dataset"),
        (["--grader", "math"], "drop --grader"),
        (["--suite-dataset", "nope=x"], "KEY one of"),
    ],
)
def test_suite_usage_errors(
    servers: tuple[ScriptedServer, ScriptedServer],
    tmp_path: Path,
    capsys: Any,
    extra: list[str],
    message: str,
) -> None:
    model, judge = servers
    before = model.request_count
    assert main([*suite_argv(model, judge, {}, tmp_path / "out"), *extra]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and message in err and "\n" not in err
    assert model.request_count == before


def test_a_suite_dataset_that_cannot_be_used_is_a_usage_error(
    servers: tuple[ScriptedServer, ScriptedServer], tmp_path: Path, capsys: Any
) -> None:
    """A malformed row of a benchmark's copy is the dataset's fault: exit 2, one line."""
    model, judge = servers
    data = fixtures(tmp_path / "data")
    broken = tmp_path / "data" / "hmmt_feb_2025" / "train.parquet"
    broken.write_bytes(b"not parquet at all")
    before = model.request_count
    assert main(suite_argv(model, judge, data, tmp_path / "out")) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and "\n" not in err, err
    assert model.request_count == before


def test_eval_without_dataset_or_suite_is_a_usage_error(tmp_path: Path, capsys: Any) -> None:
    assert (
        main(
            [
                "eval",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
            ]
        )
        == EXIT_USAGE
    )
    assert "--dataset is required" in capsys.readouterr().err
