"""A request to run code, the isolation report, and the result as the model reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import SMALL

from pacore_graph.tools.sandbox import ExecRequest, ExecResult, Isolation
from pacore_graph.tools.sandbox.values import LANGUAGES


def test_request_is_validated() -> None:
    with pytest.raises(ValueError):
        ExecRequest(code="x", language="ruby")
    with pytest.raises(ValueError):
        ExecRequest(code="a\x00b")
    assert ExecRequest(code="x", workdir="/tmp").workdir == Path("/tmp")


def test_result_text_for_the_model() -> None:
    result = ExecResult(
        stdout="out\n",
        stderr="err\n",
        exit_code=None,
        duration_s=1.5,
        limits=SMALL,
        timed_out=True,
        killed_by="wall_time",
    )
    text = result.to_tool_output()
    assert "timed out: wall-time limit of 3 s" in text
    assert "--- stdout ---\nout" in text and "--- stderr ---\nerr" in text
    long = ExecResult(stdout="x" * 50_000, stderr="", exit_code=0, duration_s=0, limits=SMALL)
    assert len(long.to_tool_output(max_chars=2000)) < 2500
    assert "characters omitted" in long.to_tool_output(max_chars=2000)


def test_isolation_report_type() -> None:
    iso = Isolation(network=True, filesystem=True, processes=True, privileges_dropped=True)
    assert iso.complete
    assert not Isolation(network=True).complete


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_is_accepted(language: str) -> None:
    assert ExecRequest(code="x", language=language).language == language  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("killed_by", "words"),
    [
        ("wall_time", f"wall-time limit of {SMALL.wall_time_s:g} s"),
        ("cpu_time", "CPU-time limit"),
    ],
)
def test_the_limit_that_stopped_the_code_is_named_from_the_limits(
    killed_by: str, words: str
) -> None:
    result = ExecResult(stdout="", stderr="", exit_code=None, duration_s=0.0, limits=SMALL,
                        timed_out=True, killed_by=killed_by)  # fmt: skip
    assert words in result.to_tool_output()
    assert not result.ok


def test_a_clean_exit_is_ok_and_a_failing_one_is_not() -> None:
    ok = ExecResult(stdout="1\n", stderr="", exit_code=0, duration_s=0.0, limits=SMALL)
    failed = ExecResult(stdout="", stderr="boom", exit_code=1, duration_s=0.0, limits=SMALL)
    assert ok.ok and not failed.ok
    assert failed.to_tool_output().startswith("[exit code 1; ")
    silent = ExecResult(stdout="", stderr="", exit_code=0, duration_s=0.0, limits=SMALL)
    assert "(no output)" in silent.to_tool_output()


@pytest.mark.parametrize(
    ("killed_by", "words"),
    [
        ("output_limit", "killed: output over"),
        ("memory", "out of memory: limit"),
        ("total_memory", "for all processes together"),
        ("workspace_full", "workspace full"),
        ("file_size", "file too large"),
        ("cancelled", "cancelled by the caller"),
        ("SIGSEGV", "killed by SIGSEGV"),
    ],
)
def test_every_cause_has_its_words(killed_by: str, words: str) -> None:
    result = ExecResult(stdout="", stderr="", exit_code=None, duration_s=0.0, limits=SMALL,
                        killed_by=killed_by)  # fmt: skip
    summary = result.summary()
    assert summary.startswith("no exit code; ") and words in summary and "\n" not in summary
