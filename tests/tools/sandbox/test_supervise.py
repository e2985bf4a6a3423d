"""The parent side of a call: output under its cap, status events, and the result they make.

The result is built from what the launcher reported (status events as JSON
lines) and what the parent saw; those pieces are fed here as the launcher
would send them, so each cause and error is checked without a namespace.
One real call checks that a cancelled call is reported as cancelled.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import started_sandbox

from pacore_graph.tools.sandbox import (
    MIB,
    ExecRequest,
    LocalSandbox,
    SandboxExecutionError,
    SandboxLimits,
    SandboxUnavailableError,
)
from pacore_graph.tools.sandbox.supervise import _build_result, _Capture, _cause, supervise

LIMITS = SandboxLimits(wall_time_s=5.0, cpu_time_s=2, max_output_bytes=64 * 1024)
ISOLATED = {"event": "isolation", "network": True, "filesystem": True, "processes": True,
            "privileges_dropped": True, "uid": 65534, "notes": []}  # fmt: skip


def status(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def capture_of(*events: dict[str, Any], stdout: bytes = b"", stderr: bytes = b"") -> _Capture:
    capture = _Capture(LIMITS.max_output_bytes)
    blob = status(*events)
    for i in range(0, len(blob), 7):  # in pieces, as a pipe delivers them
        capture.add("status", blob[i : i + 7])
    capture.add("stdout", stdout)
    capture.add("stderr", stderr)
    return capture


def test_output_is_kept_up_to_the_cap_shared_by_both_streams() -> None:
    capture = _Capture(LIMITS.max_output_bytes)
    half = LIMITS.max_output_bytes // 2
    assert capture.add("stdout", b"o" * half) and capture.add("stderr", b"e" * (half - 1))
    assert not capture.add("stdout", b"xyz")  # two bytes over what is left
    assert len(capture.stdout) + len(capture.stderr) == LIMITS.max_output_bytes
    assert capture.truncated


def test_status_lines_become_events_and_garbage_is_skipped() -> None:
    capture = _Capture(LIMITS.max_output_bytes)
    capture.add("status", b'{"event": "init", "pid": 5}\nnot json\n[1]\n{"event": "ex')
    capture.add("status", b'it", "code": 0}\n')
    assert [e["event"] for e in capture.events] == ["init", "exit"]
    assert capture.event("exit") == {"event": "exit", "code": 0}
    assert capture.event("absent") is None


def test_a_clean_exit_is_an_ok_result_with_its_isolation() -> None:
    capture = capture_of(ISOLATED, {"event": "exit", "code": 0, "cpu_s": 0.25}, stdout=b"hi\n")
    result = _build_result(LIMITS, capture, None, 0.5, 0)
    assert result.ok and result.stdout == "hi\n" and result.cpu_time_s == 0.25
    assert result.isolation.complete and result.isolation.uid == ISOLATED["uid"]


@pytest.mark.parametrize(("terminal", "error"), [(True, SandboxUnavailableError),
                                                 (False, SandboxExecutionError)])  # fmt: skip
def test_a_launcher_error_is_raised_terminal_or_not(terminal: bool, error: type[Exception]) -> None:
    capture = capture_of({"event": "error", "stage": "mounts", "message": "no",
                          "terminal": terminal})  # fmt: skip
    with pytest.raises(error, match="sandbox mounts: no"):
        _build_result(LIMITS, capture, None, 0.1, 1)


def test_a_launcher_that_reported_nothing_fails_with_its_stderr() -> None:
    capture = capture_of(stderr=b"Traceback ...\nImportError: boom\n")
    with pytest.raises(SandboxExecutionError, match=r"exit status 3\): Traceback"):
        _build_result(LIMITS, capture, None, 0.1, 3)


@pytest.mark.parametrize(
    ("event", "stderr", "cause"),
    [
        ({"signal": int(signal.SIGXCPU)}, "", "cpu_time"),
        ({"signal": int(signal.SIGKILL), "cpu_s": LIMITS.cpu_time_s}, "", "cpu_time"),
        ({"signal": int(signal.SIGKILL), "cpu_s": 0.0}, "", "SIGKILL"),
        ({"signal": int(signal.SIGXFSZ)}, "", "file_size"),
        ({"signal": int(signal.SIGSEGV)}, "", "SIGSEGV"),
        ({"code": 1}, "MemoryError\n", "memory"),
        ({"code": 1}, "OSError: [Errno 27] File too large\n", "file_size"),
        ({"code": 1}, "No space left on device\n", "workspace_full"),
        ({"code": 1}, "ValueError: mine\n", None),
        ({"code": 0, "killed_by": "total_memory"}, "", "total_memory"),
    ],
)
def test_the_cause_is_read_from_how_the_program_ended(
    event: dict[str, Any], stderr: str, cause: str | None
) -> None:
    exit_code = None if "signal" in event else event["code"]
    assert _cause({"event": "exit", **event}, LIMITS, exit_code, stderr) == cause


def test_a_kill_by_the_parent_wins_over_the_exit_it_caused() -> None:
    capture = capture_of(ISOLATED, {"event": "exit", "signal": int(signal.SIGKILL)})
    result = _build_result(LIMITS, capture, "wall_time", LIMITS.wall_time_s, 0)
    assert result.killed_by == "wall_time" and result.timed_out and result.exit_code is None


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LocalSandbox]:
    with started_sandbox(SandboxLimits(memory_bytes=256 * MIB)) as sb:
        yield sb


def test_a_call_cancelled_before_it_runs_is_reported_cancelled(sandbox: LocalSandbox) -> None:
    """supervise itself, with the config LocalSandbox builds for this request."""
    request = ExecRequest(code="import time; time.sleep(60); print('ran')")
    with tempfile.TemporaryDirectory(prefix="pacore-supervise-") as workdir:
        Path(workdir).chmod(0o777)
        config = sandbox._launch_config(sandbox._ensure_started(), request, LIMITS,
                                        Path(workdir), sandbox._drops_privileges())  # fmt: skip
        cancel = threading.Event()
        cancel.set()
        result = supervise(config, LIMITS, 1.0, cancel)
    assert result.killed_by == "cancelled" and result.exit_code is None
    assert "ran" not in result.stdout
