"""The holes found when the sandbox was attacked (issue 11, items 1, 2, 5, 6, 7), closed.

Each test replays the attack for real, bounded so that without its fix it
would *succeed* (and the assertion catch it) rather than hurt the machine:
no test allocates more than about 700 MiB or writes more than 24 MiB.
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import started_sandbox

from pacore_graph.tools.code_executor import make_code_tools
from pacore_graph.tools.sandbox import (
    MIB,
    ExecRequest,
    LocalSandbox,
    SandboxExecutionError,
    SandboxLimits,
    SandboxUnavailableError,
)
from pacore_graph.tools.sandbox.paths import interpreter_paths

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

AS_ROOT = os.geteuid() == 0

LIMITS = SandboxLimits(
    wall_time_s=5.0,
    cpu_time_s=5,
    memory_bytes=256 * MIB,
    max_total_memory_bytes=1024 * MIB,
    max_processes=16,
    max_file_bytes=4 * MIB,
    max_workspace_bytes=8 * MIB,
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LocalSandbox]:
    with started_sandbox(LIMITS) as sb:
        yield sb


def _pids_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


# --------------------------------------------------------------------------- 1: parent death

_DRIVER = """
import os
from pacore_graph.tools.sandbox import ExecRequest, LocalSandbox, SandboxLimits
sb = LocalSandbox(SandboxLimits(wall_time_s=60.0, cpu_time_s=60))
sb.start()
print("started", flush=True)
sb.execute(ExecRequest(code="import time\\ntime.sleep(600)  # " + os.environ["TOKEN"]))
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_code_dies_with_the_process_that_called_execute(sig: int) -> None:
    """Issue 11.1: after the parent is killed, the launcher must not run on under PID 1."""
    token = uuid.uuid4().hex
    driver = subprocess.Popen(  # the token in the environment: only the code has it in argv
        [sys.executable, "-c", _DRIVER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOKEN": token},
    )
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip() == "started"
        assert _wait_for(lambda: _pids_with(token), 20.0), "the sandboxed code never started"
        driver.send_signal(sig)
        driver.wait(timeout=10)
        # Without PR_SET_PDEATHSIG on the launcher this stays alive for 60 s (wall time).
        assert _wait_for(lambda: not _pids_with(token), 5.0), "code outlived its parent"
    finally:
        driver.kill()
        driver.wait(timeout=10)
        for pid in _pids_with(token):
            os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- 2: disk


def test_everything_written_in_one_call_is_capped(sandbox: LocalSandbox, tmp_path: Path) -> None:
    """Issue 11.2: many files each under the file limit used to add up without bound."""
    code = textwrap.dedent(
        """
        import os
        written = 0
        try:
            for i in range(8):  # 8 x 3 MiB = 24 MiB, each file under the 4 MiB file limit
                with open(f"f{i}", "wb") as f:
                    f.write(os.urandom(3 << 20))
                written += 3
        finally:
            print("written", written)
        """
    )
    for workdir in (tmp_path, None):
        result = sandbox.execute(ExecRequest(code=code, workdir=workdir))
        assert result.isolation.workspace_limited
        assert result.killed_by == "workspace_full", result.stderr
        assert "No space left on device" in result.stderr
        assert "workspace full" in result.to_tool_output()
        assert int(result.stdout.split()[-1]) < 8 * 3
    # What came back to the host is what fitted, no more.
    assert 0 < _tree_bytes(tmp_path) <= LIMITS.max_workspace_bytes


def test_empty_files_cannot_exhaust_inodes(sandbox: LocalSandbox) -> None:
    code = textwrap.dedent(
        """
        import os
        n = 0
        try:
            for n in range(100_000):
                open(f"e{n}", "w").close()
        except OSError as exc:
            print("stopped", n, exc.strerror)
        """
    )
    result = sandbox.execute(ExecRequest(code=code))
    assert "stopped" in result.stdout and "No space left on device" in result.stdout
    assert int(result.stdout.split()[1]) < 100_000


def test_sparse_files_are_copied_back_as_sparse(sandbox: LocalSandbox, tmp_path: Path) -> None:
    """Holes cost the tmpfs nothing: written out in full, 200 of them would be 800 MiB here."""
    code = "for i in range(200): open(f's{i}', 'wb').truncate(4 << 20)"
    result = sandbox.execute(ExecRequest(code=code, workdir=tmp_path))
    assert result.ok, result.stderr
    files = list(tmp_path.iterdir())
    assert len(files) == 200 and all(f.stat().st_size == 4 * MIB for f in files)
    assert sum(f.stat().st_blocks * 512 for f in files) < MIB


def test_a_workspace_over_the_cap_is_refused_before_running(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    (tmp_path / "big").write_bytes(b"x" * (LIMITS.max_workspace_bytes + MIB))
    with pytest.raises(SandboxExecutionError, match="max_workspace_bytes"):
        sandbox.execute(ExecRequest(code="print('ran')", workdir=tmp_path))
    assert (tmp_path / "big").stat().st_size == LIMITS.max_workspace_bytes + MIB


def test_the_workspace_comes_back_after_a_wall_time_kill(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """The code is killed, not the launcher: what it wrote before the kill is kept."""
    code = "open('partial.txt', 'w').write('saved'); import time; time.sleep(60)"
    limits = LIMITS.replace(wall_time_s=1.0)
    result = sandbox.execute(ExecRequest(code=code, workdir=tmp_path, limits=limits))
    assert result.killed_by == "wall_time"
    assert (tmp_path / "partial.txt").read_text() == "saved"


def test_every_kind_of_change_comes_back(sandbox: LocalSandbox, tmp_path: Path) -> None:
    """The copy back mirrors deletions, renames, type changes, modes and symlinks."""
    (tmp_path / "gone.txt").write_text("delete me")
    (tmp_path / "dir1" / "sub").mkdir(parents=True)
    (tmp_path / "dir1" / "sub" / "f.txt").write_text("moved")
    (tmp_path / "becomes_dir").write_text("file first")
    (tmp_path / "same.txt").write_text("untouched")
    before = (tmp_path / "same.txt").stat()
    script = (
        "rm gone.txt && mv dir1 dir2 && rm becomes_dir && mkdir becomes_dir && "
        "echo x > becomes_dir/inner && echo run > tool.sh && chmod 755 tool.sh && "
        "ln -s /etc/passwd link && mkfifo pipe && echo ok"
    )
    result = sandbox.execute(ExecRequest(code=script, language="bash", workdir=tmp_path))
    assert result.ok and result.stdout.strip() == "ok", result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["becomes_dir", "dir2", "link", "same.txt", "tool.sh"]  # no fifo
    assert (tmp_path / "dir2" / "sub" / "f.txt").read_text() == "moved"
    assert (tmp_path / "becomes_dir" / "inner").read_text() == "x\n"
    assert (tmp_path / "tool.sh").stat().st_mode & 0o777 == 0o755
    assert os.readlink(tmp_path / "link") == "/etc/passwd"  # a link, never followed
    after = (tmp_path / "same.txt").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_too_deep_a_tree_is_not_copied_back_half(sandbox: LocalSandbox, tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("kept")
    code = (
        "import os\nopen('new.txt', 'w').write('n')\n"
        "for _ in range(300):\n    os.mkdir('d'); os.chdir('d')\n"
    )
    result = sandbox.execute(ExecRequest(code=code, workdir=tmp_path))
    assert result.exit_code == 0
    assert (
        "nested deeper than 256" in result.stderr and "copying the workspace back" in result.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]  # all or nothing


def test_a_hard_link_into_the_workspace_is_not_written_through(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    outside.chmod(0o666)
    ws = tmp_path / "ws"
    ws.mkdir()
    os.link(outside, ws / "link.txt")
    result = sandbox.execute(ExecRequest(code="open('link.txt', 'w').write('changed')", workdir=ws))
    assert result.ok, result.stderr
    assert outside.read_text() == "original"
    assert (ws / "link.txt").read_text() == "changed"


# --------------------------------------------------------------------------- 5: memory


def test_total_memory_of_a_call_is_capped(sandbox: LocalSandbox) -> None:
    """Issue 11.5: six processes of 100 MB each, all under the per-process limit."""
    code = textwrap.dedent(
        """
        import os, time
        kids = []
        for _ in range(6):
            pid = os.fork()
            if pid == 0:
                block = b"x" * (100 << 20)  # resident: every page written
                time.sleep(5)
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        print("all allocated")
        """
    )
    limits = LIMITS.replace(max_total_memory_bytes=250 * MIB, wall_time_s=15.0)
    result = sandbox.execute(ExecRequest(code=code, limits=limits))
    assert "all allocated" not in result.stdout
    assert result.killed_by == "total_memory", (result.summary(), result.stderr)
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes > 250 * MIB
    assert "for all processes together" in result.to_tool_output()


def test_memory_under_the_total_cap_is_fine(sandbox: LocalSandbox) -> None:
    code = "block = b'x' * (100 << 20); print(len(block) >> 20)"
    result = sandbox.execute(ExecRequest(code=code))
    assert result.ok and result.stdout.strip() == "100"
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes < 1024 * MIB


# --------------------------------------------------------------------------- 6: workspace


@pytest.mark.skipif(not AS_ROOT, reason="root-owned files need root")
def test_a_private_root_file_in_the_workspace_stays_private(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """Issue 11.6: it used to be chowned to the sandbox uid for good, and read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root-only-token")
    secret.chmod(0o600)
    (tmp_path / "open.txt").write_text("shared")
    code = textwrap.dedent(
        """
        import os
        print(sorted(os.listdir(".")))
        for attempt in ("read", "write"):
            try:
                if attempt == "read":
                    print(open("secret.txt").read())
                else:
                    open("secret.txt", "w").write("overwritten")
                    print("wrote secret.txt")
            except OSError as exc:
                print(attempt, "refused", exc.strerror)
        open("open.txt", "a").write(" and changed")
        """
    )
    result = sandbox.execute(ExecRequest(code=code, workdir=tmp_path))
    assert result.ok, result.stderr
    assert "root-only-token" not in result.stdout
    st = secret.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)
    assert secret.read_text() == "root-only-token"
    assert (tmp_path / "open.txt").read_text() == "shared and changed"
    assert tmp_path.stat().st_uid == 0  # the workspace itself was not handed over either


@pytest.mark.parametrize("where", ["/", "home", "/etc"])
def test_unsafe_workspaces_are_refused(
    sandbox: LocalSandbox, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    workdir = home if where == "home" else Path(where)
    with pytest.raises(SandboxExecutionError, match="refused"):
        sandbox.execute(ExecRequest(code="print('ran')", workdir=workdir))
    with pytest.raises(SandboxExecutionError, match="refused"):  # a parent of HOME too
        sandbox.execute(ExecRequest(code="print('ran')", workdir=tmp_path))
    with pytest.raises(ValueError, match="refused"):  # the file tools refuse it up front
        make_code_tools(sandbox, workdir=workdir)
    # Below HOME is an ordinary workspace.
    (home / "project").mkdir()
    assert sandbox.execute(ExecRequest(code="print('ran')", workdir=home / "project")).ok


# --------------------------------------------------------------------------- 7: bad text


def test_nul_bytes_and_lone_surrogates_are_error_results(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """Issue 11.7: these raised out of the tools instead of answering the model."""
    tools = {t.name: t for t in make_code_tools(sandbox, workdir=tmp_path)}
    out = tools["run_python"].invoke({"code": "print(1)\x00"})
    assert out.startswith("error:") and "NUL" in out
    out = tools["run_shell"].invoke({"command": "echo \ud800"})
    assert out.startswith("error:") and "surrogate" in out
    out = tools["run_python"].invoke({"code": "print(1)", "stdin": "\udfff"})
    assert out.startswith("error:") and "surrogate" in out
    out = tools["write_file"].invoke({"path": "a.txt", "content": "x\ud800y"})
    assert out.startswith("error:") and "surrogate" in out and not (tmp_path / "a.txt").exists()
    out = tools["write_file"].invoke({"path": "b\ud800.txt", "content": "x"})
    assert out.startswith("error:")
    out = tools["read_file"].invoke({"path": "c\udc00.txt"})
    assert out.startswith("error:")
    # The tools still work afterwards.
    assert tools["run_python"].invoke({"code": "print('fine')"}).endswith("fine")


# --------------------------------------------------------------------------- issue 31: reads
#
# A program graded by `pacore eval` looked its test up in the dataset JSONL (or
# the eval's results.jsonl), both world-readable, and printed the expected
# output. The code now runs in a root of its own: its workspace, the
# interpreter's directories and /usr, read-only; nothing else of the host.

REPO = Path(__file__).resolve().parents[3]

_PROBE_READS = """
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as f:
            print("READ", path, f.read(64))
    except OSError as exc:
        print("DENIED", path, exc.strerror)
"""


@pytest.fixture
def world_readable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A dataset folder as found on real machines: 0755 on the way down, files 0644."""
    base = Path(tempfile.mkdtemp(prefix="pacore-world-"))
    try:
        base.chmod(0o755)
        (base / "data.jsonl").write_text('{"tests": [{"input": "1 2", "output": "3"}]}\n')
        (base / "results.jsonl").write_text('{"ground_truth": {"code_tests": {}}}\n')
        for f in base.iterdir():
            f.chmod(0o644)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _reads(sandbox: LocalSandbox, *paths: str | Path, workdir: Path | None = None) -> list[str]:
    code = "import sys\nsys.argv[1:] = " + repr([str(p) for p in paths]) + "\n" + _PROBE_READS
    result = sandbox.execute(ExecRequest(code=code, workdir=workdir))
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


def test_world_readable_files_outside_the_workspace_are_not_there(
    sandbox: LocalSandbox, world_readable: Path
) -> None:
    """Issue 31: the dataset, the results file, the project tree, /etc, the caller's home."""
    home = Path(os.path.expanduser("~"))
    targets = [
        world_readable / "data.jsonl",
        world_readable / "results.jsonl",
        REPO / "pyproject.toml",
        Path("/etc/passwd"),
        Path("/etc/hostname"),
        home / ".bashrc",
    ]
    lines = _reads(sandbox, *targets)
    assert [line.split()[0] for line in lines] == ["DENIED"] * len(targets), lines
    assert all("No such file or directory" in line for line in lines), lines


def test_the_root_holds_only_what_the_code_needs(sandbox: LocalSandbox, tmp_path: Path) -> None:
    code = "import os; print(sorted(os.listdir('/'))); print(sorted(os.listdir('/tmp')))"
    result = sandbox.execute(ExecRequest(code=code, workdir=tmp_path))
    assert result.ok, result.stderr
    top, tmp = (ast.literal_eval(line) for line in result.stdout.splitlines())
    allowed = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"}
    # Where this interpreter lives (a venv in /work, /opt, /check, ...): its folders are mounted.
    allowed |= {Path(p).parts[1] for p in interpreter_paths(sys.executable)}
    assert set(top) <= allowed, top
    for absent in ("var", "sys", "boot", "srv", "mnt", "media", "run"):
        assert absent not in top
    # Under /tmp: the workspace's own folder, and the interpreter's prefix when the venv
    # lives there (a clone in /tmp: its .venv is mounted, so its folder's name shows).
    mounted = (tmp_path, Path(sys.prefix), Path(sys.base_prefix))
    expected = {p.parts[2] for p in mounted if str(p).startswith("/tmp/") and len(p.parts) > 2}
    assert set(tmp) == expected, (tmp, expected)


def test_the_interpreter_and_standard_tools_still_work(sandbox: LocalSandbox) -> None:
    code = (
        "import json, sqlite3, ssl, decimal, hashlib, subprocess, tempfile\n"
        "print(subprocess.run(['sh', '-c', 'echo $(( 6 * 7 )) | cat'], capture_output=True,\n"
        "                     text=True).stdout.strip())\n"
        "with tempfile.NamedTemporaryFile('w') as f: f.write('x')\n"
        "print(open('/dev/null', 'w').write('gone'), len(open('/dev/urandom', 'rb').read(4)))\n"
    )
    result = sandbox.execute(ExecRequest(code=code))
    assert result.ok, result.stderr
    assert result.stdout.split() == ["42", "4", "4"]


def test_nothing_outside_the_workspace_is_writable(
    sandbox: LocalSandbox, world_readable: Path, tmp_path: Path
) -> None:
    world_readable.chmod(0o777)
    targets = [world_readable / "new.txt", "/tmp/escape.txt", "/usr/escape.txt", "/dev/shm/../x"]
    code = (
        "import sys\n"
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('x'); print('WROTE', path)\n"
        "    except OSError as exc:\n"
        "        print('DENIED', path)\n"
        "open('inside.txt', 'w').write('kept')\n"
    )
    result = sandbox.execute(ExecRequest(code=code, workdir=tmp_path))
    assert result.ok, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["DENIED"] * len(targets)
    assert not (world_readable / "new.txt").exists() and not Path("/tmp/escape.txt").exists()
    assert (tmp_path / "inside.txt").read_text() == "kept"


def test_the_sandbox_init_gives_the_code_no_way_out(sandbox: LocalSandbox) -> None:
    """PID 1 of the sandbox is not the code's to inspect: its fds and root stay closed."""
    code = (
        "import os\n"
        "for what, look in (('fd', os.listdir), ('root', os.listdir), ('cwd', os.listdir),\n"
        "                   ('environ', lambda p: open(p, 'rb').read())):\n"
        "    try:\n"
        "        print(what, look(f'/proc/1/{what}'))\n"
        "    except OSError as exc:\n"
        "        print(what, 'DENIED', exc.strerror)\n"
    )
    result = sandbox.execute(ExecRequest(code=code))
    assert result.ok, result.stderr
    for line in result.stdout.splitlines():
        assert "DENIED" in line, result.stdout


def test_a_root_that_cannot_be_built_fails_closed(tmp_path: Path) -> None:
    """Never run uncontained: a bind the launcher cannot make refuses the call, naming why."""
    import dataclasses

    with started_sandbox(LIMITS) as sb:
        probe = sb._ensure_started()
        missing = str(tmp_path / "gone")
        root = {**probe.root, "binds": [*probe.root["binds"], [missing, missing]]}
        sb._probe = dataclasses.replace(probe, root=root)
        with pytest.raises(SandboxUnavailableError, match="cannot build the sandbox's own root"):
            sb.execute(ExecRequest(code="print('ran')"))
