"""Stores that fail cleanly: a lost PostgreSQL, a corrupt SQLite file, a full disk, SIGTERM.

Real ``pacore run`` processes against the scripted server (real HTTP on
loopback), a real PostgreSQL started for the test and stopped under the run
(``pg_ctl stop -m immediate``), a real tmpfs filled up (root only; skipped
otherwise) and real signals. Each attack ends the same way: one line on
stderr naming what failed, a documented exit status, and a re-run of the
same command that finishes every problem with one line each. Subprocess
timeouts are hang guards only; nothing asserts on wall time.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import run_argv
from durable_support import (
    CHILD_ENV,
    assert_one_line_each,
    by_input,
    pacore_command,
    samples_returned,
    wait_for_samples,
    write_dataset,
)
from pg_support import postgres_server

from pacore_graph.runs.checkpoint import RUN_CHECKPOINT_SUFFIX
from pacore_graph.runs.jsonl import LineSink
from pacore_graph.testing import ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = 12
ROUNDS = (4, 2)
CONCURRENCY = 8
NEEDED = PROBLEMS * (sum(ROUNDS) + 1)
LATENCY = 0.5  # the stops below land mid-run even on a loaded machine
OUTAGE_S = 16.0
HANG_GUARD_S = 180


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_input, latency=LATENCY).run_in_thread() as srv:
        yield srv


def command(srv: ScriptedServer, data: Path, out: Path, *extra: str) -> list[str]:
    return pacore_command(srv, data, out, ROUNDS, CONCURRENCY, *extra)


def spawn(argv: list[str], cwd: Path, *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        env=CHILD_ENV,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As a non-interactive shell starts a job with ``&``: SIGINT ignored.
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if ignore_sigint
        else None,
    )


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=CHILD_ENV, cwd=cwd, capture_output=True, text=True, timeout=HANG_GUARD_S
    )


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def rerun_completes(argv: list[str], cwd: Path, out: Path) -> None:
    """The same command again ends with 0, every problem with its one successful line."""
    rerun = run(argv, cwd)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert_one_line_each(out, PROBLEMS)


def written_lines(out: Path) -> list[dict[str, object]]:
    if not out.exists():
        return []
    found = []
    for raw in out.read_text().splitlines():
        try:
            found.append(json.loads(raw))
        except ValueError:
            continue  # a line cut by the failure: it runs again
    return found


# --------------------------------------------------------------------------- PostgreSQL


def test_postgres_gone_for_good_stops_the_run_with_one_line_then_resumes(
    server: ScriptedServer, tmp_path: Path
) -> None:
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    with postgres_server() as pg:
        argv = command(server, data, out, "--checkpoint", pg.url, "--checkpoint-timeout", "3")
        proc = spawn(argv, tmp_path)
        wait_for_samples(proc, server, 20, timeout_s=HANG_GUARD_S)
        pg.stop()
        _, err = proc.communicate(timeout=HANG_GUARD_S)  # hang guard: it must end on its own
        lines = error_lines(err)
        assert proc.returncode == 1, err[-3000:]
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith(f"pacore: run failed: checkpoint store {pg.url} unreachable")
        assert "Connection refused" in lines[0]  # why, from a fresh connection
        assert "--checkpoint none" in lines[0]
        # No problem is recorded as failed for the store's fault.
        assert all(not line.get("error") for line in written_lines(out))
        pg.start()
        rerun_completes(argv, tmp_path, out)


def test_postgres_outage_shorter_than_the_timeout_costs_only_the_wait(
    server: ScriptedServer, tmp_path: Path
) -> None:
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    with postgres_server() as pg:
        argv = command(server, data, out, "--checkpoint", pg.url, "--checkpoint-timeout", "25")
        proc = spawn(argv, tmp_path)
        wait_for_samples(proc, server, 20, timeout_s=HANG_GUARD_S)
        pg.stop()
        # Past psycopg's pool reconnection at 15 s (backing off 1, 2, 4, 8 s; next at 31):
        # the run must come back through the guard's fresh attempts, not the pool's backoff.
        time.sleep(OUTAGE_S)
        pg.start()
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 0, err[-3000:]
    assert err.strip() == ""  # no psycopg warnings, no traceback
    assert_one_line_each(out, PROBLEMS)


def test_postgres_down_at_the_start_names_it_without_its_password(
    server: ScriptedServer, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://pacore:s3cret@127.0.0.1:{port}/postgres"
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    done = run(
        command(server, data, out, "--checkpoint", url, "--checkpoint-timeout", "1"), tmp_path
    )
    lines = error_lines(done.stderr)
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and "s3cret" not in done.stderr
    assert f"postgresql://pacore:***@127.0.0.1:{port}/postgres" in lines[0]
    assert "--checkpoint none" in lines[0]
    assert server.request_count == 0


# --------------------------------------------------------------------------- SQLite


def test_corrupt_sqlite_checkpoint_file_is_one_line_exit_2(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pacore_graph.cli import main

    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    store = tmp_path / ("results.jsonl" + RUN_CHECKPOINT_SUFFIX)
    store.write_bytes(b"not a database, " * 512)
    argv = run_argv(data, out, "2", "--no-progress", base_url=server.base_url, model="scripted")
    code = main(argv)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1, lines
    assert str(store) in lines[0] and "--checkpoint none" in lines[0]
    assert server.request_count == 0


def test_sqlite_file_with_corrupt_pages_is_refused_before_any_call(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A valid header over damaged pages: found by the integrity check at open, not mid-run."""
    from pacore_graph.cli import main

    store = tmp_path / "ck.sqlite"
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        db.execute("CREATE INDEX t_v ON t (v)")
        db.executemany("INSERT INTO t VALUES (?, ?)", ((i, f"value {i}" * 8) for i in range(3000)))
    db.close()
    raw = bytearray(store.read_bytes())
    page = 4096
    for start in range(2 * page, len(raw) - page, 3 * page):
        raw[start + 8 : start + 200] = os.urandom(192)  # past each page header: cells, pointers
    store.write_bytes(bytes(raw))
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    argv = run_argv(data, out, "2", "--no-progress", base_url=server.base_url, model="scripted")
    code = main([*argv, "--checkpoint", f"sqlite:///{store}"])
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1, lines
    assert str(store) in lines[0]
    assert server.request_count == 0


# --------------------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs (``mount`` needs root: skipped when refused)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` up to ``leave`` free bytes; returns the filler (delete it to free space)."""
    filler = disk / "filler"
    stats = os.statvfs(disk)
    size = stats.f_bavail * stats.f_frsize - leave
    with filler.open("wb") as fh:
        fh.write(b"\0" * max(size, 0))
    return filler


def test_full_disk_under_the_results_file_is_one_line_naming_it(
    server: ScriptedServer, tmp_path: Path, small_disk: Path
) -> None:
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), small_disk / "results.jsonl"
    filler = fill(small_disk, 3 * 4096)  # the lock's page, then about two pages of lines
    argv = command(server, data, out, "--checkpoint", f"sqlite:///{tmp_path / 'ck.sqlite'}")
    done = run(argv, tmp_path)
    lines = error_lines(done.stderr)
    assert done.returncode == 1, done.stderr[-3000:]
    assert lines == [f"pacore: error: {out}: No space left on device"], done.stderr[-3000:]
    assert 0 < len(written_lines(out)) < PROBLEMS  # it failed mid-run, not before
    filler.unlink()
    rerun_completes(argv, tmp_path, out)


def test_full_disk_under_the_sqlite_checkpoints_is_one_line_naming_them(
    server: ScriptedServer, tmp_path: Path, small_disk: Path
) -> None:
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    store = small_disk / "ck.sqlite"
    filler = fill(small_disk, 96 * 1024)  # room to open the store, not for the run
    argv = command(server, data, out, "--checkpoint", f"sqlite:///{store}")
    done = run(argv, tmp_path)
    lines = error_lines(done.stderr)
    assert done.returncode == 1, done.stderr[-3000:]
    assert len(lines) == 1, done.stderr[-3000:]  # no "Task exception was never retrieved"
    assert lines[0].startswith(f"pacore: run failed: checkpoint store {store} failed (")
    assert "full" in lines[0] and "--checkpoint none" in lines[0]
    # Runs cancelled by the stop are not recorded as failed problems.
    assert all(not line.get("error") for line in written_lines(out))
    filler.unlink()
    rerun_completes(argv, tmp_path, out)


def test_full_disk_before_the_run_is_refused_before_any_call(
    server: ScriptedServer, tmp_path: Path, small_disk: Path
) -> None:
    """The default store beside an output on a full disk: cannot be opened, so nothing runs."""
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), small_disk / "results.jsonl"
    fill(small_disk, 0)
    done = run(command(server, data, out), tmp_path)
    lines = error_lines(done.stderr)
    assert done.returncode == 2, done.stderr[-3000:]
    store = small_disk / ("results.jsonl" + RUN_CHECKPOINT_SUFFIX)
    assert len(lines) == 1 and lines[0].startswith(
        f"pacore: error: --checkpoint {store}: cannot open the SQLite checkpoint file ("
    ), done.stderr[-3000:]
    assert server.request_count == 0


def test_a_line_that_cannot_be_written_names_the_file() -> None:
    """The kernel's own "disk full" (``/dev/full``), without mounting anything."""
    target = Path("/dev/full")
    if not target.exists():
        pytest.skip("no /dev/full")
    with LineSink(target) as sink, pytest.raises(OSError) as caught:
        sink.write('{"id": "q0"}\n')
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)


# --------------------------------------------------------------------------- SIGTERM


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["plain", "sigint-ignored"])
def test_sigterm_stops_like_ctrl_c_and_the_rerun_resumes(
    server: ScriptedServer, tmp_path: Path, ignore_sigint: bool
) -> None:
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "results.jsonl"
    argv = command(server, data, out)
    proc = spawn(argv, tmp_path, ignore_sigint=ignore_sigint)
    wait_for_samples(proc, server, 30, timeout_s=HANG_GUARD_S)
    time.sleep(LATENCY / 2)  # between responses, as test_durable_runs kills
    at_signal = samples_returned(server)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, err[-3000:]
    assert error_lines(err) == ["pacore: terminated (SIGTERM); run the same command to resume"]
    time.sleep(2 * LATENCY)
    in_flight = samples_returned(server) - at_signal
    rerun_completes(argv, tmp_path, out)
    # Resumed from the checkpoints: only what was in flight at the signal was asked again.
    assert samples_returned(server) <= NEEDED + in_flight
    assert in_flight <= CONCURRENCY * max(ROUNDS)
