"""The local sandbox (``LocalSandbox``): normal behaviour, and containment of hostile code.

Every containment test runs the hostile program for real and checks, from
the outside, that it was stopped and reported and that the parent (this test
process, this machine) is unharmed. Each one is written so that it would fail
if its containment were removed: the hostile programs are bounded (fork 200
times, allocate 1 GiB, write 100 MiB...) so that without the limit they would
*succeed* and the assertion would catch it, rather than take the machine down.

Isolation is required: these tests fail, not skip, when the sandbox cannot
create its namespaces here. Set ``PACORE_SANDBOX_ALLOW_UNISOLATED=1`` to skip
them on a machine known to lack namespaces (never in CI).
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import SMALL, started_sandbox

import pacore_graph.tools.sandbox as sandbox_package
from pacore_graph.tools.sandbox import (
    MIB,
    CodeExecutor,
    ExecRequest,
    ExecResult,
    Language,
    LocalSandbox,
    SandboxExecutionError,
    SandboxUnavailableError,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

AS_ROOT = os.geteuid() == 0
#: The sandbox package's own folder, and the checkout it lies in (from the package, not
#: from this file's depth, which moved when the tests came to mirror the code).
SANDBOX_DIR = Path(sandbox_package.__file__).resolve().parent
REPO = SANDBOX_DIR.parents[1]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LocalSandbox]:
    with started_sandbox(SMALL) as sb:
        yield sb


def run(
    sb: LocalSandbox,
    code: str,
    language: Language = "python",
    *,
    workdir: Path | None = None,
    stdin: str = "",
    **limits: object,
) -> ExecResult:
    request = ExecRequest(
        code=code,
        language=language,
        workdir=workdir,
        stdin=stdin,
        limits=SMALL.replace(**limits) if limits else None,
    )
    return sb.execute(request)


def _pids_with(token: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == str(os.getpid()):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def assert_parent_unharmed(token: str | None = None) -> None:
    """Nothing the sandbox started is left, and this process can still spawn children."""
    if token is not None:
        deadline = time.monotonic() + 2.0
        while _pids_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids_with(token) == [], "a sandboxed process outlived its call"
    assert subprocess.run(["true"], timeout=10).returncode == 0


# --------------------------------------------------------------------------- values


def test_local_sandbox_follows_the_protocol(sandbox: LocalSandbox) -> None:
    assert isinstance(sandbox, CodeExecutor)
    with LocalSandbox(SMALL) as sb:
        assert sb.execute(ExecRequest(code="print(1)")).stdout == "1\n"
    with pytest.raises(SandboxUnavailableError):
        sb.execute(ExecRequest(code="print(1)"))


# --------------------------------------------------------------------------- normal behaviour


def test_stdout_stderr_and_exit_codes(sandbox: LocalSandbox) -> None:
    r = run(sandbox, "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3)
    assert not r.timed_out and r.killed_by is None and not r.ok
    r = run(sandbox, "echo hello; echo oops >&2; exit 7", "bash")
    assert (r.stdout, r.stderr, r.exit_code) == ("hello\n", "oops\n", 7)
    r = run(sandbox, "def broken(:\n")
    assert r.exit_code == 1 and "SyntaxError" in r.stderr
    r = run(sandbox, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert r.exit_code is None and r.killed_by == "SIGSEGV"
    r = run(sandbox, "print('ok')")
    assert r.ok and not r.timed_out and r.limits == SMALL
    assert r.isolation.complete and r.network_isolated


def test_stdin_is_given_and_large_stdin_cannot_deadlock(sandbox: LocalSandbox) -> None:
    r = run(sandbox, "import sys; print(sys.stdin.read().upper())", stdin="hello")
    assert r.stdout == "HELLO\n"
    big = "x" * (4 * MIB)  # far beyond a pipe buffer; the program never reads it
    r = run(sandbox, "print('ignored stdin')", stdin=big)
    assert r.stdout == "ignored stdin\n"
    r = run(sandbox, "wc -c", "bash", stdin=big)
    assert r.stdout.strip() == str(4 * MIB)


def test_code_larger_than_argv_allows(sandbox: LocalSandbox) -> None:
    filler = "#" + "x" * 200_000 + "\n"
    assert run(sandbox, filler + "print('big python')").stdout == "big python\n"
    assert run(sandbox, filler + "echo big bash", "bash").stdout == "big bash\n"


def test_given_workspace_persists_between_calls(sandbox: LocalSandbox, tmp_path: Path) -> None:
    (tmp_path / "given.txt").write_text("from the host\n")
    r = run(
        sandbox, "open('made.txt', 'w').write(open('given.txt').read().upper())", workdir=tmp_path
    )
    assert r.ok, r.stderr
    r = run(sandbox, "cat made.txt; pwd", "bash", workdir=tmp_path)
    assert r.stdout == f"FROM THE HOST\n{tmp_path}\n"
    assert (tmp_path / "made.txt").read_text() == "FROM THE HOST\n"
    assert run(sandbox, "sed -i s/host/sandbox/ given.txt", "bash", workdir=tmp_path).ok
    assert (tmp_path / "given.txt").read_text() == "from the sandbox\n"


def test_the_running_interpreter_and_its_packages_are_usable(sandbox: LocalSandbox) -> None:
    """Snippets and shell commands get this venv (e.g. to run a repository's tests)."""
    assert sandbox.python == sys.executable
    r = run(sandbox, "import sys, pytest; print(sys.executable)")
    assert r.stdout == f"{sys.executable}\n", r.stderr
    r = run(sandbox, "python -c 'import pytest' && pytest --version", "bash")
    assert r.ok and "pytest" in r.stdout + r.stderr


def test_fresh_workspace_is_a_removed_temporary_directory(sandbox: LocalSandbox) -> None:
    r = run(sandbox, "import os, tempfile; print(os.getcwd()); print(tempfile.mkstemp()[1])")
    cwd, tmpfile = r.stdout.split()
    assert r.ok and tmpfile.startswith(cwd + "/")  # TMPDIR is the workspace
    assert cwd != run(sandbox, "import os; print(os.getcwd())").stdout.strip()
    assert not os.path.exists(cwd)


async def test_aexecute_runs_concurrently_without_blocking_the_loop(
    sandbox: LocalSandbox,
) -> None:
    # Four calls each sleep about 1 s under a unique argument. A ticker on the event
    # loop looks at the host's processes: it must run while the sleeps run (the
    # loop is not blocked) and see more than one of them at once (not in sequence).
    tokens = [f"1.{uuid.uuid4().int % 10**6:06d}{i}" for i in range(4)]
    seen_at_once: list[int] = []
    roomy = SMALL.replace(wall_time_s=30)  # this test is not about the wall time

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.02)
            seen_at_once.append(sum(1 for token in tokens if _pids_with(token)))

    tick_task = asyncio.create_task(ticker())
    results = await asyncio.gather(
        *(
            sandbox.aexecute(
                ExecRequest(code=f"sleep {token}; echo {i}", language="bash", limits=roomy)
            )
            for i, token in enumerate(tokens)
        )
    )
    tick_task.cancel()
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)], results
    assert max(seen_at_once) >= 2  # in sequence, at most one would ever run
    assert sum(1 for n in seen_at_once if n) >= 2  # the loop ticked while they ran


async def test_cancelling_aexecute_kills_the_code(sandbox: LocalSandbox) -> None:
    token = f"987.{uuid.uuid4().int % 10**6}"
    request = ExecRequest(
        code=f"sleep {token}", language="bash", limits=SMALL.replace(wall_time_s=30)
    )
    task = asyncio.create_task(sandbox.aexecute(request))
    for _ in range(3000):  # until the code runs (a hang guard, not a timing assumption)
        if _pids_with(token) or task.done():
            break
        await asyncio.sleep(0.01)
    assert _pids_with(token), "the code never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_parent_unharmed(token)


def test_missing_workspace_is_a_recoverable_error(sandbox: LocalSandbox, tmp_path: Path) -> None:
    with pytest.raises(SandboxExecutionError):
        run(sandbox, "print(1)", workdir=tmp_path / "missing")
    assert run(sandbox, "print(1)").ok


# --------------------------------------------------------------------------- containment


def test_infinite_loop_is_stopped_by_cpu_time(sandbox: LocalSandbox) -> None:
    r = run(sandbox, "while True: pass", cpu_time_s=1, wall_time_s=10)
    assert r.killed_by == "cpu_time" and r.timed_out and r.exit_code is None
    assert r.cpu_time_s is not None and r.cpu_time_s > 0.5  # rusage is coarser than the limit
    assert "CPU-time limit" in r.to_tool_output()
    assert_parent_unharmed()


def test_infinite_loop_is_stopped_by_wall_time(sandbox: LocalSandbox) -> None:
    r = run(sandbox, "while True: pass", wall_time_s=1, cpu_time_s=30)
    assert r.killed_by == "wall_time" and r.timed_out and r.exit_code is None
    # Sleeping uses no CPU, and ignoring SIGTERM only buys the grace period: had
    # the program outlived its sleep it would have printed and exited with 0.
    r = run(
        sandbox,
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
        "print('survived')",
        wall_time_s=1,
    )
    assert r.killed_by == "wall_time" and r.exit_code is None and "survived" not in r.stdout
    assert "timed out: wall-time limit of 1 s" in r.to_tool_output()
    assert_parent_unharmed()


def test_closing_stdout_does_not_escape_the_time_limit(sandbox: LocalSandbox) -> None:
    # Had the call waited for the program to end, it would have exited by itself with 3.
    code = "import os, time\nos.close(1); os.close(2)\ntime.sleep(60)\nos._exit(3)"
    r = run(sandbox, code, wall_time_s=1)
    assert r.killed_by == "wall_time" and r.exit_code is None


def test_fork_is_limited_by_max_processes(sandbox: LocalSandbox) -> None:
    # Bounded: without RLIMIT_NPROC all 200 forks succeed and the assertion fails.
    code = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('refused:', exc.strerror)\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
        "print('forked', n)\n"
    )
    r = run(sandbox, code)
    assert "refused: Resource temporarily unavailable" in r.stdout
    forked = int(r.stdout.split("forked")[1])
    assert forked < SMALL.max_processes
    # The children sleep 30 s holding stdout: had the call waited for them, the
    # 3 s wall-time limit would have ended it and it would not be ok.
    assert r.ok and not r.timed_out
    assert_parent_unharmed()


async def test_each_sandbox_has_its_own_process_budget(sandbox: LocalSandbox) -> None:
    """Concurrent sandboxes share the uid but not the budget: no starving each other."""
    code = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(3)\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        break\n"
        "    n += 1\n"
        "print(n)\n"
        "time.sleep(0.5)\n"  # hold the children while the others fork
    )
    results = await asyncio.gather(*(sandbox.aexecute(ExecRequest(code=code)) for _ in range(3)))
    notes = [note for r in results for note in r.isolation.notes]
    assert not any("budget shared" in note for note in notes), notes
    counts = [int(r.stdout) for r in results]
    assert all(SMALL.max_processes // 2 < n < SMALL.max_processes for n in counts), counts
    assert sum(counts) > SMALL.max_processes


def test_fork_bomb_is_contained(sandbox: LocalSandbox) -> None:
    token = f"bomb-{uuid.uuid4().hex}"  # every bomb process carries it in its cmdline
    peak = 0
    stop = threading.Event()

    def watch() -> None:  # the host's view: how many bomb processes exist at once
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, len(_pids_with(token)))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        bomb = f": {token}; :(){{ :|:& }};: ; while :; do :; done"
        r = run(sandbox, bomb, "bash", wall_time_s=1.5)
    finally:
        stop.set()
        watcher.join()
    assert r.killed_by in ("wall_time", "output_limit")
    assert 1 <= peak <= SMALL.max_processes
    assert_parent_unharmed(token)


def test_memory_hog_is_stopped_at_the_address_space_limit(sandbox: LocalSandbox) -> None:
    r = run(sandbox, "x = bytearray(4 << 30)")
    assert r.killed_by == "memory" and "MemoryError" in r.stderr and r.exit_code == 1
    # Bounded at 1 GiB: without RLIMIT_AS this succeeds and the assertion fails.
    code = (
        "chunks = []\n"
        "try:\n"
        "    for _ in range(64):\n"
        "        chunks.append(bytearray(16 << 20))\n"
        "finally:\n"
        "    print(len(chunks) * 16)\n"
    )
    r = run(sandbox, code)
    assert r.killed_by == "memory" and "out of memory" in r.to_tool_output()
    assert int(r.stdout) < SMALL.memory_bytes // MIB
    assert_parent_unharmed()


def test_huge_file_is_cut_at_the_file_size_limit(sandbox: LocalSandbox, tmp_path: Path) -> None:
    code = (
        "with open('big', 'wb') as f:\n    for _ in range(100):\n        f.write(b'x' * (1 << 20))"
    )
    r = run(sandbox, code, workdir=tmp_path)
    assert r.killed_by == "file_size" and "File too large" in r.stderr
    assert (tmp_path / "big").stat().st_size <= SMALL.max_file_bytes
    r = run(sandbox, "head -c 100M /dev/zero > big2; echo status=$?", "bash", workdir=tmp_path)
    assert "File size limit exceeded" in r.stderr and "status=153" in r.stdout
    assert (tmp_path / "big2").stat().st_size <= SMALL.max_file_bytes
    assert_parent_unharmed()


def test_writing_outside_the_workspace_fails(sandbox: LocalSandbox, tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    targets = [
        REPO / f"escape-{token}",
        Path("/root") / f"escape-{token}",
        Path("/etc") / f"escape-{token}",
        Path(tempfile.gettempdir()) / f"escape-{token}",
        Path("/tmp") / f"escape-{token}",
        Path("/var/tmp") / f"escape-{token}",
        tmp_path.parent / f"escape-{token}",
    ]
    code = (
        "import sys\n"
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('escaped')\n"
        "        print('WROTE', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.strerror)\n"
        f"open('/dev/shm/escape-{token}', 'w').write('private')\n"
        f"print('shm', open('/dev/shm/escape-{token}').read())\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    r = run(sandbox, code, workdir=ws)
    assert r.ok, r.stderr
    assert "WROTE" not in r.stdout
    assert r.stdout.count("refused") == len(targets)
    assert "Read-only file system" in r.stdout
    for target in targets:
        assert not target.exists(), f"{target} was written from the sandbox"
    # /dev/shm is a private tmpfs: usable inside, invisible outside.
    assert "shm private" in r.stdout
    assert not Path(f"/dev/shm/escape-{token}").exists()
    # What the root holds of the host (here a file the loader reads) is read-only too.
    r = run(sandbox, "touch /tmp/x; mkdir /var/tmp/y; rm -rf /etc/ld.so.cache", "bash")
    assert r.exit_code != 0 and Path("/etc/ld.so.cache").exists()


def test_inherited_secrets_are_not_visible(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("PACORE_TEST_SECRET", secret)
    code = (
        "import os, glob\n"
        "print(sorted(os.environ))\n"
        "print('key', os.environ.get('OPENAI_API_KEY'))\n"
        "found = []\n"
        f"for path in glob.glob('/proc/*/environ') + ['/proc/{os.getpid()}/environ']:\n"
        "    try:\n"
        "        if b'sk-test-' in open(path, 'rb').read():\n"
        "            found.append(path)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('found', found)\n"
    )
    r = run(sandbox, code)
    assert r.ok, r.stderr
    assert secret not in r.stdout + r.stderr
    assert "found []" in r.stdout and "key None" in r.stdout
    names = set(ast.literal_eval(r.stdout.splitlines()[0]))
    assert names <= {"PATH", "LANG", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE"} | {
        "PYTHONUNBUFFERED",
        "TERM",
        "LC_CTYPE",
    }
    r = run(sandbox, "env; echo ${OPENAI_API_KEY:-unset}", "bash")
    assert secret not in r.stdout and "OPENAI" not in r.stdout and r.stdout.endswith("unset\n")


def _accepted(listener: socket.socket) -> bool:
    listener.setblocking(False)
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


_CONNECT = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
    "    print('CONNECTED')\n"
    "except OSError as exc:\n"
    "    print('FAILED', exc)\n"
)


def test_network_connection_to_a_host_listener_is_blocked(sandbox: LocalSandbox) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        r = run(sandbox, _CONNECT.format(port=port))
        accepted = _accepted(listener)
    connected = "CONNECTED" in r.stdout or accepted
    # The flag must tell the truth either way; and here isolation must be on.
    assert r.network_isolated == (not connected)
    assert r.network_isolated, f"network isolation unavailable: {r.isolation.notes}"
    assert r.stdout.startswith("FAILED") and not accepted


def test_network_flag_really_allows_it_positive_control(sandbox: LocalSandbox) -> None:
    # Proves the probe above can see a connection when the namespace is not there.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        r = run(sandbox, _CONNECT.format(port=port), network=True)
        accepted = _accepted(listener)
    assert r.stdout.startswith("CONNECTED") and accepted
    assert r.network_isolated is False


def test_hundreds_of_megabytes_of_output_are_capped(sandbox: LocalSandbox) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = (
        "import sys\n"
        "chunk = 'x' * 65536\n"
        "for _ in range(500 * 16):  # 500 MiB\n"
        "    sys.stdout.write(chunk)\n"
    )
    r = run(sandbox, code, max_output_bytes=1 * MIB, wall_time_s=10)
    assert r.output_truncated and r.killed_by == "output_limit"
    assert len(r.stdout) + len(r.stderr) <= 1 * MIB
    r = run(sandbox, "yes 'stderr flood' >&2", "bash", max_output_bytes=1 * MIB)
    assert r.output_truncated and len(r.stderr) <= 1 * MIB
    assert r.killed_by == "output_limit"  # stopped by the cap, not by the wall time
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024
    assert_parent_unharmed()


def test_background_grandchild_cannot_hold_the_call_open(sandbox: LocalSandbox) -> None:
    token = f"987.{uuid.uuid4().int % 10**6}"
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen(['sleep', '{token}'], start_new_session=True)\n"  # holds stdout
        f"subprocess.Popen(['sleep', '{token}1'], stdout=subprocess.DEVNULL,\n"
        "                 stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "print('main exits')\n"
    )
    r = run(sandbox, code, wall_time_s=20)
    # The grandchild sleeps 987 s holding stdout: had the call waited for it, the
    # 20 s wall-time limit would have ended it and it would not be ok.
    assert r.ok and not r.timed_out and r.stdout == "main exits\n"
    assert_parent_unharmed(token)


def test_code_runs_unprivileged(sandbox: LocalSandbox) -> None:
    r = run(
        sandbox, "grep -E '^(Uid|CapEff|NoNewPrivs)' /proc/self/status; echo ==; ls /proc", "bash"
    )
    status, listing = r.stdout.split("==\n")
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert fields["CapEff"].strip() == "0000000000000000"
    assert fields["NoNewPrivs"].strip() == "1"
    uid = int(fields["Uid"].split()[0])
    assert uid == (65534 if AS_ROOT else os.geteuid())
    visible = [p for p in listing.split() if p.isdigit()]
    assert len(visible) <= 4  # the sandbox's own PID namespace, not the host's processes
    r = run(sandbox, "import ctypes; print(ctypes.CDLL(None).setuid(0))")
    assert r.stdout.strip() == "-1"


@pytest.mark.skipif(not AS_ROOT, reason="a directory closed to the sandbox uid needs root")
def test_workspace_under_an_unreachable_directory_is_reachable(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    private = tmp_path / "private"
    ws = private / "ws"
    ws.mkdir(parents=True)
    (private / "secret.txt").write_text("root only")
    private.chmod(0o700)
    r = run(sandbox, "import os; open('x', 'w').write('ok'); print(os.listdir('..'))", workdir=ws)
    assert r.ok, r.stderr
    assert r.stdout.strip() == "['ws']"  # root's other files stay hidden
    assert (ws / "x").read_text() == "ok"


def test_a_checkout_in_an_unreachable_directory_still_runs_code(
    sandbox: LocalSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's own files may sit under a directory the sandbox uid cannot enter.

    ``mktemp -d`` makes a 0700 directory: a clone there is unreachable by the
    sandbox user, and it is not in the sandbox's root at all. The launcher
    must have loaded its helpers before it pivots into that root.
    """
    from pacore_graph.tools.sandbox import supervise

    private = tmp_path / "private"
    checkout = private / "checkout"
    ws = private / "ws"
    checkout.mkdir(parents=True)
    ws.mkdir()
    here = Path(supervise.__file__).parent
    for name in ("launcher.py", "workspace_copy.py"):
        shutil.copy(here / name, checkout / name)
    private.chmod(0o700)
    monkeypatch.setattr(supervise, "_LAUNCHER", str(checkout / "launcher.py"))
    r = run(sandbox, "open('x', 'w').write('ok'); print('ran')", workdir=ws)
    assert r.ok, r.stderr
    assert r.stdout.strip() == "ran"
    assert (ws / "x").read_text() == "ok"  # copied in and back by the relocated launcher


# Run by an ordinary user: fork as often as NPROC allows, then try to write /tmp.
_AS_USER_CODE = """
import os, time
n = 0
for _ in range(50):
    try:
        if os.fork() == 0:
            time.sleep(9)
            os._exit(0)
    except OSError:
        break
    n += 1
print(n)
try:
    open("/tmp/escape", "w")
except OSError as exc:
    print(exc.errno)
"""

_AS_USER_DRIVER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location(
    "sbx", {module!r} + "/__init__.py", submodule_search_locations=[{module!r}]
)
m = importlib.util.module_from_spec(spec)
sys.modules["sbx"] = m
spec.loader.exec_module(m)
sb = m.LocalSandbox(m.SandboxLimits(max_processes=8, wall_time_s=5))
r = sb.execute(m.ExecRequest(code=CODE))
import pathlib, tempfile
ws = pathlib.Path(tempfile.mkdtemp())
(ws / "given.txt").write_text("in")
code = "cat given.txt; echo out > made.txt"
w = sb.execute(m.ExecRequest(code=code, language="bash", workdir=ws))
import os
secrets = [os.environ["HOME"] + "/secret.txt", __file__]  # the user's home, the "project"
peek = "for f in " + " ".join(secrets) + "; do cat $f 2>/dev/null || echo hidden; done; "
peek += "ls /proc/1/fd >/dev/null 2>&1 && echo open || echo hidden"  # init, same uid
p = sb.execute(m.ExecRequest(code=peek, language="bash"))
print(json.dumps(dict(iso=r.isolation.complete, net=r.network_isolated, out=r.stdout,
                      ws=[w.stdout, w.isolation.workspace_limited, (ws / "made.txt").read_text()],
                      peek=p.stdout.split())))
""".replace("CODE", repr(_AS_USER_CODE))


@pytest.mark.skipif(not AS_ROOT, reason="runs the suite's checks as an ordinary user")
def test_started_by_an_ordinary_user() -> None:
    """Without root: a user namespace gives the same isolation, and NPROC still bites."""
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3")
    here = Path(tempfile.mkdtemp(prefix="pacore-user-test-"))
    try:
        _run_as_ordinary_user(python, here)
    finally:
        shutil.rmtree(here, ignore_errors=True)


def _run_as_ordinary_user(python: str, here: Path) -> None:
    here.chmod(0o755)
    script = here / "as_user.py"
    module = here / "sandbox"  # a copy: the checkout may be unreadable to that user
    shutil.copytree(SANDBOX_DIR, module, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (module, *module.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    script.write_text(_AS_USER_DRIVER.format(module=str(module)))
    script.chmod(0o644)
    uid = 4242
    home = here / "home"  # the user's own home, which the user's sandboxed code must not read
    home.mkdir()
    (home / "secret.txt").write_text("api-key-of-the-user")
    os.chown(home, uid, uid)
    os.chown(home / "secret.txt", uid, uid)
    home.chmod(0o700)
    out = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python, str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )
    if "cannot create namespaces" in out.stderr:
        pytest.fail(f"no user namespaces for ordinary users here: {out.stderr[-500:]}")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["iso"] and report["net"], report
    forked, errno_line = report["out"].split()
    assert int(forked) < 8 and errno_line == "30"  # NPROC held; EROFS outside the workspace
    assert report["ws"] == ["in", True, "out\n"]  # the tmpfs workspace works without root too
    # Issue 31: its own home and files are not there, nor what the sandbox's init holds.
    assert report["peek"] == ["hidden", "hidden", "hidden"]
