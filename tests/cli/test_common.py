"""cli/common: the checks every command makes before any model call, and the run summary.

Each refusal is a ``UsageError`` (exit 2) whose text is one line naming the
flag; the files are real ones under ``tmp_path``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pacore_graph.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SKIPPED_INPUT,
    EXIT_USAGE,
    UsageError,
    _check_base_url,
    _check_base_urls,
    readable_file,
    run_summary,
    utf8_text,
    writable_file,
)
from pacore_graph.errors import PaCoReError
from pacore_graph.values.records import PaCoReResult, Trajectory


def test_exit_statuses_are_distinct_and_a_usage_error_is_a_pacore_error() -> None:
    assert (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIPPED_INPUT) == (0, 1, 2, 3)
    assert issubclass(UsageError, PaCoReError)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.example.com/v1"])
def test_good_base_urls_pass(url: str) -> None:
    _check_base_url(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://h/v1", "must be an http(s) URL"),
        ("127.0.0.1:8000", "must be an http(s) URL"),
        ("http://h:notaport/v1", "--base-url 'http://h:notaport/v1': "),
        ("http://u:secret@h/v1", "must not carry credentials"),
    ],
)
def test_bad_base_urls_are_one_line_naming_the_flag(url: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        _check_base_url(url)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "secret" not in text


def test_a_replica_named_twice_is_refused() -> None:
    _check_base_urls(None)
    _check_base_urls(["http://a/v1", "http://b/v1"])
    with pytest.raises(UsageError, match="--base-url http://a/v1 is given twice"):
        _check_base_urls(["http://a/v1", "http://b/v1", "http://a/v1"])


def test_readable_file_refuses_missing_and_directories(tmp_path: Path) -> None:
    good = tmp_path / "in.jsonl"
    good.write_text("{}\n")
    readable_file(good, "--input")
    with pytest.raises(UsageError, match=r"^--input .*: no such file$"):
        readable_file(tmp_path / "missing.jsonl", "--input")
    with pytest.raises(UsageError, match="is a directory, not a file"):
        readable_file(tmp_path, "--input")


def test_writable_file_refuses_directories_and_uncreatable_paths(tmp_path: Path) -> None:
    writable_file(tmp_path / "new" / "deep" / "out.jsonl", "--output")  # parents get made
    with pytest.raises(UsageError, match="is a directory; give a file name"):
        writable_file(tmp_path, "--output")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot create a file in"):
        writable_file(blocker / "out.jsonl", "--output")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anything")
def test_writable_file_refuses_a_read_only_file(tmp_path: Path) -> None:
    ro = tmp_path / "ro.jsonl"
    ro.write_text("")
    ro.chmod(0o444)
    with pytest.raises(UsageError, match="not writable"):
        writable_file(ro, "--output")


def test_text_with_undecodable_bytes_is_refused_with_the_position() -> None:
    assert utf8_text("ok é", "the question") == "ok é"
    text = b"ab\xffc".decode("utf-8", "surrogateescape")
    with pytest.raises(UsageError) as caught:
        utf8_text(text, "the question")
    assert str(caught.value) == (
        "the question is not valid UTF-8 (undecodable byte at character 3)"
    )


def test_the_summary_counts_rounds_failures_and_tokens() -> None:
    rounds = (
        (
            Trajectory(round=0, index=0, content="a", completion_tokens=5),
            Trajectory(round=0, index=1, error="HTTP 500"),
            Trajectory(round=0, index=2, content="b", finish_reason="length", completion_tokens=7),
        ),
        (Trajectory(round=1, index=0, content="c", completion_tokens=3),),
    )
    result = PaCoReResult(answer="c", reasoning=None, rounds=rounds, schedule=(3, 1), wall_s=2.26)
    assert run_summary(result) == (
        "rounds: 2 (3+1)  trajectories: 4  failures: 1  truncated: 1  "
        "effective TTC: 15 tokens (12, 3)  wall: 2.3s"
    )


@pytest.mark.embedded
async def test_a_slow_embedded_start_is_not_a_silent_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """While the embedded model loads (2-3 s here, 9 s at load 14) a line comes every few seconds.

    The real model starts; the interval is shortened so its start spans several.
    """
    from embedded_support import require_embedded

    from pacore_graph.cli import common
    from pacore_graph.settings.env_settings import load_settings

    require_embedded()
    monkeypatch.setattr(common, "_STARTING_HEARTBEAT", 0.2)
    async with common.open_endpoint(load_settings(env={})) as endpoint:
        assert endpoint.base_urls[0].startswith("http://127.0.0.1:")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("starting the embedded model server")
    assert lines[-1].startswith("embedded server ready in ")
    beats = lines[1:-1]
    assert beats and all(b.startswith("  still starting the embedded model, ") for b in beats)


def test_what_cli_modules_share_is_public() -> None:
    """No cli module imports another's private (underscore) name: what is shared is in
    the sharing module's ``__all__``."""
    import ast
    import importlib

    folder = Path(__file__).resolve().parents[2] / "pacore_graph" / "cli"
    private, unlisted = [], []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "pacore_graph.cli"
            ):
                assert node.module is not None
                listed = getattr(importlib.import_module(node.module), "__all__", ())
                for alias in node.names:
                    if alias.name.startswith("_"):
                        private.append(f"{path.name}: {node.module}.{alias.name}")
                    elif alias.name not in listed:
                        unlisted.append(f"{path.name}: {node.module}.{alias.name}")
    assert private == [] and unlisted == []
