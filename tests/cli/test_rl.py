"""cli/rl: the RL commands' own checks: bad grader or reporters, a missing file, one line each.

What the commands produce is the rl layer's (tests/rl/); here ``main`` runs
in-process and what is checked is the exit status, the one-line error and
that nothing was written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pacore_graph.cli import EXIT_USAGE, main
from pacore_graph.cli.common import UsageError
from pacore_graph.cli.rl import _reporters


def test_reporters_are_one_name_or_a_list() -> None:
    assert _reporters("none") == "none"
    assert _reporters(" wandb , tensorboard ,") == ["wandb", "tensorboard"]
    with pytest.raises(UsageError, match="--report-to: name at least one reporter"):
        _reporters(" , ")


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and "\n" not in err, err
    return err


def test_export_episodes_with_an_unknown_grader_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, out = tmp_path / "results.jsonl", tmp_path / "episodes.jsonl"
    results.write_text("")
    argv = ["export-episodes", str(results), "--out", str(out), "--grader", "no_such_grader"]
    assert main(argv) == EXIT_USAGE
    assert "--grader: " in one_line_error(capsys)
    assert not out.exists()


def test_export_episodes_of_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "episodes.jsonl"
    assert main(["export-episodes", str(tmp_path / "none.jsonl"), "--out", str(out)]) == EXIT_USAGE
    assert "none.jsonl" in one_line_error(capsys)
    assert not out.exists()


def test_train_under_the_one_process_trap_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``accelerate launch --cpu --num_processes 2`` started one process: exit 2, one line."""
    pytest.importorskip("trl")  # the [rl] extra: without it the command names what is missing
    for name in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    out = tmp_path / "out"
    argv = [
        "train",
        "--dataset",
        str(tmp_path / "none.jsonl"),
        "--model",
        "m",
        "--output-dir",
        str(out),
    ]
    assert main(argv) == EXIT_USAGE
    assert "starts one process" in one_line_error(capsys)
    assert not out.exists()
