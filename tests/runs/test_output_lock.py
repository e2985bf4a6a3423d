"""One writer per results file: a second ``pacore run`` / ``pacore eval`` on it is refused.

The lock is a real ``flock`` beside the output; the holder is a real
``pacore run`` process against the scripted server, killed with SIGKILL to
show that the kernel releases the lock with the process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_support import run_argv

from pacore_graph.runs.output_lock import OutputLockedError, hold_output_lock, lock_path
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
PROBLEMS = 8


def by_input(req: ScriptedRequest) -> ScriptedReply:
    return ScriptedReply(content=f"answer {len(req.last_user) % 97}", completion_tokens=5)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_input, latency=0.3).run_in_thread() as srv:
        yield srv


def write_dataset(path: Path) -> Path:
    with path.open("w") as fh:
        for i in range(PROBLEMS):
            q = {"id": f"q{i}", "messages": [{"role": "user", "content": f"What is {i} + 1?"}]}
            fh.write(json.dumps(q) + "\n")
    return path


def test_the_lock_is_exclusive_and_removed_on_release(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "results.jsonl"
    with hold_output_lock(out) as lock:
        assert lock == lock_path(out) and lock.read_text().strip() == str(os.getpid())
        # flock belongs to an open file: a second open, even in this process, is refused.
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"), hold_output_lock(out):
            pass
    assert not lock_path(out).exists()
    with hold_output_lock(out):  # free again
        pass


def test_two_names_of_one_output_share_its_lock(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.touch()
    alias = tmp_path / "alias.jsonl"
    alias.symlink_to(out)
    with hold_output_lock(out), pytest.raises(OutputLockedError), hold_output_lock(alias):
        pass


@pytest.fixture
def stalled() -> Iterator[ScriptedServer]:
    """An upstream that never answers within a test: a run on it holds its output until killed."""
    with ScriptedServer(by_input, latency=3600).run_in_thread() as srv:
        yield srv


def pacore(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``pacore ARGV`` run to its end as its own process."""
    return subprocess.run(
        [sys.executable, "-m", "pacore_graph.cli", *argv],
        env=ENV,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def holding(argv: list[str], cwd: Path, out: Path) -> Iterator[subprocess.Popen[str]]:
    """``pacore ARGV`` in the background, yielded once it holds ``out``'s lock.

    Killed with SIGKILL on the way out: no handler of its runs, so whatever
    frees the lock afterwards is the kernel closing its files.
    """
    first = subprocess.Popen(
        [sys.executable, "-m", "pacore_graph.cli", *argv],
        env=ENV,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120  # hang guard
        lock = lock_path(out)
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.01)
        yield first
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)


def refused(argv: list[str], cwd: Path) -> str:
    """``pacore ARGV``'s one-line error; it must exit with 2 and say nothing else."""
    proc = pacore(argv, cwd)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_second_run_on_a_held_output_is_refused_and_sigkill_frees_it(
    server: ScriptedServer, stalled: ScriptedServer, tmp_path: Path
) -> None:
    data, out = write_dataset(tmp_path / "data.jsonl"), tmp_path / "results.jsonl"

    def argv(base_url: str) -> list[str]:
        return run_argv(data, out, "4,2", "--no-progress", base_url=base_url, model="scripted")

    with (
        holding(argv(stalled.base_url), tmp_path, out) as first,
        ScriptedServer(by_input).run_in_thread() as other,
    ):
        error = refused(argv(other.base_url), tmp_path)
        assert error.startswith(f"pacore: error: --output: {out} is being written by pid ")
        assert f"pid {first.pid}" in error
        assert other.request_count == 0  # refused before any model call
    assert lock_path(out).exists()  # left behind by the kill, but no longer held
    third = pacore(argv(server.base_url), tmp_path, timeout=180)
    assert third.returncode == 0, third.stderr[-3000:]
    ids = [json.loads(line)["request_id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(f"q{i}" for i in range(PROBLEMS))
    assert not lock_path(out).exists()  # a normal exit removes it


def test_a_hard_link_to_a_running_outputs_file_is_refused(
    stalled: ScriptedServer, tmp_path: Path
) -> None:
    """Issue 31 (low): a run on a hard link of a running run's output ran everything again.

    The lock beside a file is named by its path, and a hard link has another
    one; the lock on the file itself is the inode's, whatever its name.
    """
    data, out = write_dataset(tmp_path / "data.jsonl"), tmp_path / "results.jsonl"
    out.touch()
    alias = tmp_path / "elsewhere" / "alias.jsonl"
    alias.parent.mkdir()
    os.link(out, alias)
    argv = run_argv(data, out, "4,2", "--no-progress", base_url=stalled.base_url, model="m")
    with (
        holding(argv, tmp_path, out) as first,
        ScriptedServer(by_input).run_in_thread() as other,
    ):
        argv = run_argv(data, alias, "4,2", "--no-progress", base_url=other.base_url, model="m")
        error = refused(argv, tmp_path)
        assert other.request_count == 0, "the second run called the model"
        assert error.startswith(f"pacore: error: --output: {alias} is being written by")
        assert f"pid {first.pid}" in error and "another name" in error
    assert out.read_text() == ""  # nothing was written through the alias


def test_the_lock_on_the_file_itself_is_taken_and_an_unused_file_is_not_left(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.jsonl"
    with hold_output_lock(out):
        assert out.exists() and out.stat().st_mode & 0o777 == 0o600
        link = tmp_path / "link.jsonl"
        os.link(out, link)
        refused = pytest.raises(OutputLockedError, match=f"pid {os.getpid()}.*another name")
        with refused, hold_output_lock(link):
            pass
        link.unlink()
    assert not out.exists()  # made for the lock and still empty: removed on release
    out.write_text("kept\n")
    with hold_output_lock(out):
        pass
    assert out.read_text() == "kept\n"


def test_eval_on_a_held_out_dir_is_refused(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pacore_graph.cli import main
    from pacore_graph.eval.harness import RESULTS

    data = tmp_path / "gt.jsonl"
    row = {"id": "g1", "messages": [{"role": "user", "content": "1+1?"}], "ground_truth": "2"}
    data.write_text(json.dumps(row) + "\n")
    out_dir = tmp_path / "ev"
    argv = ["eval", "--dataset", str(data), "--out", str(out_dir), "--methods", "single"]
    argv += ["--base-url", server.base_url, "--model", "scripted", "--no-progress"]
    with hold_output_lock(out_dir / RESULTS):
        code = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"pacore: error: --out: {out_dir / RESULTS} is being written by")
    assert server.request_count == 0
    assert main(argv) == 0  # released: the same command runs
