"""cli/swe: ``pacore swe`` end to end, its bad arguments refused before any model call, its help.

The model is the SWE example's scripted bug-fixer over real HTTP; the
repository is a fresh copy of the example's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from swe_support import EX, EXAMPLE, TEST_COMMAND, example_repo

from pacore_graph.cli import main
from pacore_graph.testing import ScriptedServer


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return example_repo(tmp_path)


def test_pacore_swe_command(repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    diff_out = tmp_path / "fix.diff"
    with ScriptedServer(EX.scripted_fixer, model="m").run_in_thread() as srv:
        code = main(
            [
                "swe",
                "--repo",
                str(repo),
                "--issue",
                str(EXAMPLE / "ISSUE.md"),
                "--test",
                TEST_COMMAND,
                "--rounds",
                "2",
                "--base-url",
                srv.base_url,
                "--model",
                "m",
                "--diff-out",
                str(diff_out),
                "--json",
            ]
        )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["resolved"] is True and out["attempts_passing"] == 3
    assert diff_out.read_text() == out["diff"] and "sorted(values)" in out["diff"]
    assert (
        main(
            [
                "swe",
                "--repo",
                str(repo),
                "--issue",
                str(EXAMPLE / "ISSUE.md"),
                "--test",
                "pytest -q",
            ]
        )
        == 2
    )
    assert "tool-calling model" in capsys.readouterr().err


def test_swe_refuses_bad_arguments_before_any_model_call(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 11.8: these used to raise a traceback, ``--diff-out`` only after every model call."""
    (tmp_path / "a-directory").mkdir()
    bad_issue = tmp_path / "issue.bin"
    bad_issue.write_bytes(b"fix \xff this")
    cases = [
        (["--test", ""], "--test is empty"),
        (["--test", "   "], "--test is empty"),
        (["--test", "pytest -q", "--diff-out", str(tmp_path / "a-directory")], "is a directory"),
        (["--test", "pytest -q", "--diff-out", str(tmp_path / "no" / "x.diff")], "not a dir"),
        (["--test", "pytest -q", "--issue", str(bad_issue)], "UTF-8"),
        (["--test", "pytest -q", "--repo", "/"], "refused"),
        (["--test", "pytest -q", "--repo", str(tmp_path / "missing")], "not a directory"),
    ]
    with ScriptedServer(EX.scripted_fixer, model="m").run_in_thread() as srv:
        for extra, message in cases:
            args = ["swe", "--base-url", srv.base_url, "--model", "m"]
            if "--issue" not in extra:
                args += ["--issue", str(EXAMPLE / "ISSUE.md")]
            if "--repo" not in extra:
                args += ["--repo", str(repo)]
            assert main([*args, *extra]) == 2, extra
            err = capsys.readouterr().err.strip()
            assert err.startswith("pacore: error:") and message in err and "\n" not in err
        assert list(srv.requests) == []


def test_swe_lists_only_flags_that_do_something_there(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["swe", "--help"])
    text = capsys.readouterr().out
    for useless in ("--compactor", "--client", "--no-batch", "--logprobs", "--token-ids"):
        assert useless not in text
    for useful in ("--base-url", "--temperature", "--max-tokens", "--retries", "--diff-out"):
        assert useful in text
