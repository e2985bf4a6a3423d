"""Running untrusted code (model output): the executor protocol and a local sandbox.

A tool-using explorer runs whatever Python or shell the model wrote. That code
must not be able to take the host down, read the run's API keys, reach the
network, or change anything outside its workspace, and it must never make the
parent wait forever. This module gives:

* :class:`CodeExecutor`, the lifecycle protocol (``start`` / ``execute`` /
  ``aexecute`` / ``shutdown``) every backend implements, so a container or a
  remote sandbox can replace the local one without touching the tools;
* :class:`ExecRequest`, :class:`SandboxLimits` and :class:`ExecResult`, the
  plain values that cross that protocol;
* :class:`LocalSandbox`, the default backend: a subprocess on this machine.

Ordinary outcomes of running code are *results*, not exceptions: a time-out,
a crash, output cut at the cap or a blown memory limit come back as an
:class:`ExecResult` the model can read and react to. Exceptions are for the
sandbox itself (see :class:`SandboxError`).

How :class:`LocalSandbox` contains the code (Linux only)
--------------------------------------------------------
The parent starts a small launcher (this file, run with ``python -I -S``) in
a new session, so one ``killpg`` reaches everything it spawns. The launcher,
as root, enters new **mount, PID, IPC and network namespaces** (``unshare(2)``
through ``ctypes``; Python 3.11 has no ``os.unshare``), then:

* makes every mount of the host **read-only** in its private mount namespace
  (``mount_setattr(2)`` with ``AT_RECURSIVE``, Linux >= 5.12) except a bind
  mount of the workspace and a small private tmpfs on ``/dev/shm``: the code
  can write its workspace and nothing else, not the repository, ``/root``,
  ``/etc``, ``/tmp`` or ``/var/tmp`` (``TMPDIR`` points at the workspace);
* covers directories the sandbox user cannot enter but needs to pass through
  (a venv whose interpreter lives under ``/root``, a workspace below a 0700
  directory) with an empty tmpfs, and binds back only the needed paths, so
  the interpreter runs and nothing else of, say, root's home is visible;
* runs the code as the PID namespace's second process under a tiny init (PID 1)
  that reaps orphans; when the code's main process exits, the init exits and
  the kernel kills every process left in the namespace, so a background
  grandchild cannot outlive the call or hold the output pipes open, even
  after ``setsid``. A fresh ``/proc`` shows only the sandbox's processes;
* leaves the network namespace with only a loopback interface (brought up,
  so servers *inside* the sandbox can talk to each other), which is checked
  before the code runs: no route to the host's loopback or anywhere else;
* drops privileges in the code's process: ``setgroups([])``, ``setgid`` and
  ``setuid`` to ``nobody`` (65534), then a user namespace of its own mapping
  only that uid, with every capability dropped. Not being root is what makes
  ``RLIMIT_NPROC`` bite (the kernel never enforces it for root) and keeps the
  code from undoing the mounts; the own user namespace makes that process
  budget per sandbox (Linux >= 5.14 counts it per user namespace), so one
  explorer's fork bomb cannot starve its siblings. ``PR_SET_NO_NEW_PRIVS``
  stops set-uid programs from giving privileges back;
* sets the resource limits (``setrlimit``) of :class:`SandboxLimits`: CPU
  time, address space, processes, file size and open files, no core dumps,
  and ``oom_score_adj`` 1000 so that if the host ever runs short of memory
  the kernel kills sandboxed code first;
* gives the code a **scrubbed environment**: only ``PATH`` (system
  directories, after the sandbox Python's own ``bin``), ``LANG``, ``HOME``
  and ``TMPDIR`` (both the workspace), ``PYTHONDONTWRITEBYTECODE``,
  ``PYTHONUNBUFFERED`` and ``TERM``, plus what the caller passes explicitly
  as ``extra_env``. Nothing is inherited, so no API key or token leaks;
  stdin is a private in-memory file, so a large stdin can never deadlock.

The parent enforces wall time and output size itself: it reads stdout and
stderr with ``selectors`` (never blocking on a full pipe), stops at the
output cap, and on time-out sends ``SIGTERM`` then, after a short grace,
``SIGKILL`` to the whole process group. It waits on a pidfd, not on EOF,
and every wait is bounded, so the parent always returns.

Started by an ordinary user instead of root, the launcher enters a new user
namespace first (unprivileged user namespaces are on by default on Debian)
and drops every capability before running the code, which then runs as that
user; everything else above holds. Only the standard library and the Linux
system calls are used: no setuid helper, no package to install.

What is not contained (documented, not hidden)
----------------------------------------------
* The code can **read** whatever the host lets ``nobody`` read: world-readable
  files anywhere, including other sandboxes' workspaces, which share the uid;
  it is not a chroot. Keep secrets out of world-readable files. Inside its
  user namespace, files of other users show as owned by 65534 (the kernel's
  overflow id); that is display only.
* World-writable filesystem Unix sockets (e.g. the D-Bus system bus) stay
  reachable: a network namespace isolates IP and abstract sockets only.
* Memory is limited per process (``RLIMIT_AS``), so the total is at most
  ``max_processes * memory_bytes`` (plus ``shm_bytes``); there is no
  cgroup-wide cap (the cgroup tree belongs to whoever runs the machine).
  ``oom_score_adj`` makes the sandbox the first victim should that ever be
  too much for the host.
* The code may create user namespaces of its own (as any unprivileged process
  can): they give it nothing over the host, but they are kernel attack surface.
* ``memory`` and ``file_size`` in :attr:`ExecResult.killed_by` are inferred
  from the program's own error output when it failed with an error rather
  than a signal (Python turns both into exceptions).
* When the namespaces cannot be created (no ``CAP_SYS_ADMIN`` and no user
  namespaces, e.g. some containers, or a kernel without ``mount_setattr``),
  there is no network, filesystem or PID isolation. By default
  (:attr:`SandboxLimits.require_isolation`) the sandbox then refuses to run
  (:class:`SandboxUnavailableError`) before any code runs; with
  ``require_isolation=False`` it runs with the rlimits, the scrubbed
  environment and the privilege drop only (a grandchild that calls
  ``setsid`` may then outlive the call), and says so in
  :attr:`ExecResult.isolation` (``network_isolated`` is False, and so on).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import json
import os
import platform
import resource
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NoReturn, Protocol, Self, runtime_checkable

__all__ = [
    "DEFAULT_SANDBOX_GID",
    "DEFAULT_SANDBOX_UID",
    "MIB",
    "BaseCodeExecutor",
    "CodeExecutor",
    "ExecRequest",
    "ExecResult",
    "Isolation",
    "Language",
    "LocalSandbox",
    "SandboxError",
    "SandboxExecutionError",
    "SandboxLimits",
    "SandboxUnavailableError",
]

MIB = 1024 * 1024
"""One mebibyte, for writing limits."""

DEFAULT_SANDBOX_UID = 65534
"""``nobody`` on Debian: the uid code runs as when the sandbox is started by root."""

DEFAULT_SANDBOX_GID = 65534
"""``nogroup`` on Debian."""

Language = Literal["python", "bash"]
"""``python``: a snippet run with the sandbox's Python. ``bash``: a shell command."""

_LANGUAGES: tuple[str, ...] = ("python", "bash")

# A standard PATH; the sandbox Python's own bin directory (a venv's) goes first.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Code longer than this goes through an in-memory file instead of argv
# (one argv string may be at most 128 KiB on Linux).
_ARGV_CODE_MAX = 64 * 1024

# Markers of an allocation failure / a file-size failure in a program's stderr.
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FILE_SIZE_MARKERS = ("File too large", "File size limit exceeded")

# The launcher is this very file run as a script, once per execution, so its
# module-level imports are paid on every call: asyncio (50 ms) is imported
# where it is used instead.
_LAUNCH_FLAG = "--pacore-sandbox-launch"


# --------------------------------------------------------------------------- errors


class SandboxError(RuntimeError):
    """Base class of the sandbox's own failures (never of the code it runs).

    Code that fails, times out or is killed is an ordinary :class:`ExecResult`;
    these exceptions mean the sandbox could not do its job.
    """


class SandboxUnavailableError(SandboxError):
    """Terminal: this backend cannot run code at all here, and retrying will not help.

    Raised by ``start`` (or the first ``execute``) when the platform is not
    Linux, no usable Python runs as the sandbox user, the isolation that
    :attr:`SandboxLimits.require_isolation` demands cannot be set up, or the
    executor has been shut down. A run should stop rather than feed this to
    the model.
    """


class SandboxExecutionError(SandboxError):
    """Recoverable: this one call could not be started; the executor still works.

    E.g. a workspace that does not exist or that the sandbox user cannot
    reach, an interpreter that failed to ``exec``, or the sandbox uid's process
    budget momentarily used up by concurrent sandboxes. Fix the request or
    retry; the tools report it to the model as an error message.
    """


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """What one execution may use. Every field is enforced by :class:`LocalSandbox`.

    Defaults suit a model running snippets and small test suites; tests use
    much smaller values. Per-call overrides come from trusted code (an
    :class:`ExecRequest`), never from the model.
    """

    wall_time_s: float = 10.0
    """Real time from launch until the whole process group is killed (default 10 s)."""

    cpu_time_s: int = 10
    """CPU seconds per process (``RLIMIT_CPU``; SIGXCPU, then SIGKILL a second later; 10)."""

    memory_bytes: int = 512 * MIB
    """Address space per process (``RLIMIT_AS``, default 512 MiB): allocations beyond fail."""

    max_processes: int = 64
    """Processes and threads at once (``RLIMIT_NPROC``, default 64): stops fork bombs.

    Counted per sandbox where user namespaces are available (see the module
    docstring), else across all sandboxes of the same uid.
    """

    max_file_bytes: int = 16 * MIB
    """Largest file the code may write (``RLIMIT_FSIZE``, default 16 MiB)."""

    max_output_bytes: int = 1 * MIB
    """stdout + stderr kept (default 1 MiB); at the cap the code is killed, output truncated."""

    max_open_files: int = 256
    """Open file descriptors per process (``RLIMIT_NOFILE``, default 256)."""

    shm_bytes: int = 64 * MIB
    """Size of the private tmpfs on ``/dev/shm`` (POSIX shared memory, semaphores; 64 MiB)."""

    network: bool = False
    """Allow network access (default False: a new network namespace with only loopback)."""

    require_isolation: bool = True
    """Refuse to run (:class:`SandboxUnavailableError`) unless the namespaces are in place.

    When False, code runs without network/filesystem/PID isolation where the
    platform cannot provide it, and :attr:`ExecResult.isolation` says so.
    """

    def __post_init__(self) -> None:
        for name in ("wall_time_s",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        for name in (
            "cpu_time_s",
            "memory_bytes",
            "max_processes",
            "max_file_bytes",
            "max_output_bytes",
            "max_open_files",
            "shm_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.memory_bytes < 32 * MIB:
            raise ValueError("SandboxLimits.memory_bytes below 32 MiB cannot start an interpreter")
        if self.max_open_files < 16:
            raise ValueError("SandboxLimits.max_open_files must be at least 16")
        for name in ("network", "require_isolation"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"SandboxLimits.{name} must be a bool")

    def replace(self, **changes: Any) -> SandboxLimits:
        """A copy with some limits changed (validated like the original)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecRequest:
    """One piece of code to run.

    ``workdir`` is a workspace that persists between calls (a repository copy,
    say); without it every call gets a fresh temporary directory that is
    deleted afterwards. ``limits`` replaces the executor's defaults for this
    call only.
    """

    code: str
    language: Language = "python"
    workdir: Path | None = None
    stdin: str = ""
    limits: SandboxLimits | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.code, str):
            raise TypeError("ExecRequest.code must be a str")
        if "\x00" in self.code:
            raise ValueError("ExecRequest.code must not contain NUL characters")
        if self.language not in _LANGUAGES:
            raise ValueError(f"ExecRequest.language must be one of {_LANGUAGES}")
        if not isinstance(self.stdin, str):
            raise TypeError("ExecRequest.stdin must be a str")
        if self.workdir is not None and not isinstance(self.workdir, Path):
            object.__setattr__(self, "workdir", Path(self.workdir))


@dataclass(frozen=True, slots=True, kw_only=True)
class Isolation:
    """Which containment layers were actually in force for an execution.

    Each flag is what the launcher *verified*, not what was asked for.
    """

    network: bool = False
    """No network: a new network namespace whose only interface is loopback."""

    filesystem: bool = False
    """Host mounts read-only; only the workspace (and a private ``/dev/shm``) writable."""

    processes: bool = False
    """New PID namespace: host processes invisible; every leftover process killed at exit."""

    privileges_dropped: bool = False
    """The code ran without root and without capabilities (as ``uid``)."""

    uid: int | None = None
    """The uid the code ran as."""

    notes: tuple[str, ...] = ()
    """Why a layer is missing, when one is."""

    @property
    def complete(self) -> bool:
        """Filesystem, process and privilege isolation all in force.

        ``network`` is separate: it is off by design when the limits allow network.
        """
        return self.filesystem and self.processes and self.privileges_dropped


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecResult:
    """What happened when code ran: the model reads it through :meth:`to_tool_output`.

    ``exit_code`` is the main process's exit status, or None when it did not
    exit by itself (killed by a limit or a signal). ``killed_by`` names what
    ended it: ``"wall_time"``, ``"cpu_time"``, ``"output_limit"``,
    ``"memory"`` or ``"file_size"`` (the last two inferred from its error
    output when the program turned the limit into an error), or a signal name
    such as ``"SIGSEGV"`` (``"cancelled"`` when the caller cancelled
    ``aexecute``). ``timed_out`` is true for either time limit.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    duration_s: float
    limits: SandboxLimits
    timed_out: bool = False
    output_truncated: bool = False
    killed_by: str | None = None
    cpu_time_s: float | None = None
    isolation: Isolation = Isolation()

    @property
    def network_isolated(self) -> bool:
        """Whether no-network was actually enforced for this execution."""
        return self.isolation.network

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0."""
        return self.exit_code == 0 and self.killed_by is None

    def summary(self) -> str:
        """One line for logs and for the head of the tool output."""
        parts: list[str] = []
        if self.exit_code is not None:
            parts.append(f"exit code {self.exit_code}")
        else:
            parts.append("no exit code")
        if self.killed_by == "wall_time":
            parts.append(f"timed out: wall-time limit of {self.limits.wall_time_s:g} s")
        elif self.killed_by == "cpu_time":
            parts.append(f"timed out: CPU-time limit of {self.limits.cpu_time_s} s")
        elif self.killed_by == "output_limit":
            parts.append(f"killed: output over {_size(self.limits.max_output_bytes)}")
        elif self.killed_by == "memory":
            parts.append(f"out of memory: limit {_size(self.limits.memory_bytes)} per process")
        elif self.killed_by == "file_size":
            parts.append(f"file too large: limit {_size(self.limits.max_file_bytes)}")
        elif self.killed_by == "cancelled":
            parts.append("cancelled by the caller")
        elif self.killed_by is not None:
            parts.append(f"killed by {self.killed_by}")
        if self.output_truncated and self.killed_by != "output_limit":
            parts.append("output truncated")
        parts.append(f"{self.duration_s:.2f} s")
        return "; ".join(parts)

    def to_tool_output(self, max_chars: int = 20_000) -> str:
        """The text a model sees: summary, then stdout and stderr (each clipped to fit)."""
        budget = max(200, max_chars // 2)
        lines = [f"[{self.summary()}]"]
        if self.stdout:
            lines += ["--- stdout ---", _clip(self.stdout, budget).rstrip("\n")]
        if self.stderr:
            lines += ["--- stderr ---", _clip(self.stderr, budget).rstrip("\n")]
        if not self.stdout and not self.stderr:
            lines.append("(no output)")
        if self.output_truncated:
            lines.append(f"[output truncated at {_size(self.limits.max_output_bytes)}]")
        return "\n".join(lines)


def _size(n: int) -> str:
    if n % MIB == 0:
        return f"{n // MIB} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def _clip(text: str, limit: int) -> str:
    """Head and tail of ``text`` when it is longer than ``limit`` characters."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n... [{omitted} characters omitted] ...\n{text[-tail:]}"


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class CodeExecutor(Protocol):
    """The lifecycle every code-execution backend implements.

    ``start`` prepares the backend (and raises :class:`SandboxUnavailableError`
    if it cannot work here); ``execute`` runs one request and returns its
    result, raising only :class:`SandboxError`; ``aexecute`` does the same
    without ever blocking the event loop; ``shutdown`` releases everything and
    is idempotent. Implementations must be safe to call from several threads
    and tasks at once: parallel explorers share nothing but may share one
    executor.
    """

    def start(self) -> None: ...

    def execute(self, request: ExecRequest) -> ExecResult: ...

    async def aexecute(self, request: ExecRequest) -> ExecResult: ...

    def shutdown(self) -> None: ...


class BaseCodeExecutor:
    """Context-manager plumbing and a thread-based ``aexecute`` for backends.

    A backend implements ``start``, ``execute`` and ``shutdown``; ``with`` and
    ``async with`` then start and shut it down.
    """

    def start(self) -> None:
        """Prepare the backend; the default has nothing to prepare."""

    def execute(self, request: ExecRequest) -> ExecResult:
        raise NotImplementedError

    async def aexecute(self, request: ExecRequest) -> ExecResult:
        """Run :meth:`execute` in a worker thread so the event loop stays free."""
        import asyncio  # here, not at the top: see _LAUNCH_FLAG

        return await asyncio.to_thread(self.execute, request)

    def shutdown(self) -> None:
        """Release the backend; the default has nothing to release."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    async def __aenter__(self) -> Self:
        import asyncio

        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


# --------------------------------------------------------------------------- local backend


@dataclass(frozen=True, slots=True)
class _Probe:
    python: str
    python_paths: tuple[str, ...]
    bash: str | None
    isolation: Isolation


class LocalSandbox(BaseCodeExecutor):
    """Runs code in a contained subprocess on this machine (see the module docstring).

    ``limits`` are the defaults for every call. ``python`` is the interpreter
    for Python snippets (its ``bin`` directory goes first on ``PATH``, so a
    venv's ``pytest`` is found); by default the running one, or, should it not
    run inside the sandbox, the first of its real path, its base interpreter
    and ``/usr/bin/python3`` that does (:attr:`python` tells which).
    ``extra_env`` adds explicit variables to the scrubbed environment (never
    put secrets there). ``sandbox_uid``/``sandbox_gid`` are used when started
    as root; a given workspace is handed to that uid (``chown`` of every entry
    not yet owned by it) before each call so the code can write it.
    ``temp_root`` is where fresh workspaces are made (default: the system temp
    directory). ``kill_grace_s`` is the time between SIGTERM and SIGKILL.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        python: str | os.PathLike[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        sandbox_uid: int = DEFAULT_SANDBOX_UID,
        sandbox_gid: int = DEFAULT_SANDBOX_GID,
        temp_root: str | os.PathLike[str] | None = None,
        kill_grace_s: float = 0.2,
    ) -> None:
        self._limits = limits if limits is not None else SandboxLimits()
        if not isinstance(self._limits, SandboxLimits):
            raise TypeError("limits must be a SandboxLimits")
        self._python_choice = os.fspath(python) if python is not None else None
        self._extra_env = dict(extra_env or {})
        for key, value in self._extra_env.items():
            if not isinstance(key, str) or not isinstance(value, str) or "=" in key:
                raise ValueError(f"bad extra_env entry {key!r}")
        self._uid = sandbox_uid
        self._gid = sandbox_gid
        self._temp_root = Path(temp_root) if temp_root is not None else None
        if kill_grace_s < 0:
            raise ValueError("kill_grace_s must be >= 0")
        self._grace = kill_grace_s
        self._lock = threading.Lock()
        self._probe: _Probe | None = None
        self._closed = False

    # -- public surface

    @property
    def limits(self) -> SandboxLimits:
        """The default limits of every call."""
        return self._limits

    @property
    def python(self) -> str:
        """The interpreter Python snippets run with (starts the sandbox if needed)."""
        return self._ensure_started().python

    @property
    def isolation(self) -> Isolation:
        """What containment this machine gives (measured by ``start``)."""
        return self._ensure_started().isolation

    def start(self) -> None:
        """Check the platform and find an interpreter the sandbox user can run.

        Runs one trivial program through the full launcher, so any problem
        shows up here as :class:`SandboxUnavailableError` instead of in the
        middle of a run. Idempotent; ``execute`` calls it if needed.
        """
        self._ensure_started()

    def shutdown(self) -> None:
        """Refuse further calls. Nothing outlives a call, so there is nothing to kill."""
        with self._lock:
            self._closed = True

    def execute(self, request: ExecRequest) -> ExecResult:
        """Run ``request`` to completion within its limits; never hangs.

        Raises :class:`SandboxUnavailableError` (terminal) or
        :class:`SandboxExecutionError` (this call only); every outcome of the
        code itself, a time-out included, is returned as an :class:`ExecResult`.
        """
        return self._execute(request, None)

    async def aexecute(self, request: ExecRequest) -> ExecResult:
        """:meth:`execute` in a worker thread; cancelling the task kills the code."""
        import asyncio

        cancel = threading.Event()
        try:
            return await asyncio.to_thread(self._execute, request, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    # -- start-up

    def _ensure_started(self) -> _Probe:
        with self._lock:
            if self._closed:
                raise SandboxUnavailableError("this LocalSandbox has been shut down")
            if self._probe is None:
                self._probe = self._detect()
            return self._probe

    def _drops_privileges(self) -> bool:
        return os.geteuid() == 0

    def _detect(self) -> _Probe:
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailableError(f"LocalSandbox needs Linux, not {sys.platform}")
        bash = shutil.which("bash", path=_SYSTEM_PATH)
        failures: list[str] = []
        for candidate in self._python_candidates():
            try:
                paths = _interpreter_paths(candidate)
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                failures.append(f"{candidate}: {exc}")
                continue
            probe = _Probe(python=candidate, python_paths=paths, bash=bash, isolation=Isolation())
            request = ExecRequest(code="import sys, encodings; print(sys.version_info[0])")
            limits = self._limits.replace(wall_time_s=max(10.0, self._limits.wall_time_s))
            try:
                result = self._run(probe, request, limits, None)
            except SandboxExecutionError as exc:
                failures.append(f"{candidate}: {exc}")
                continue
            if result.exit_code == 0 and result.stdout.strip() == "3":
                return dataclasses.replace(probe, isolation=result.isolation)
            detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [
                result.summary()
            ]
            failures.append(f"{candidate}: {detail[0]}")
        raise SandboxUnavailableError(
            "no Python interpreter runs inside the sandbox: " + "; ".join(failures)
        )

    def _python_candidates(self) -> list[str]:
        if self._python_choice is not None:
            return [self._python_choice]
        found: list[str] = []
        for path in (
            sys.executable,
            os.path.realpath(sys.executable),
            getattr(sys, "_base_executable", None),
            "/usr/bin/python3",
        ):
            if path and os.path.isabs(path) and os.path.exists(path) and path not in found:
                found.append(path)
        return found

    def _temp_dir_root(self) -> Path:
        return self._temp_root if self._temp_root is not None else Path(tempfile.gettempdir())

    # -- one call

    def _execute(self, request: ExecRequest, cancel: threading.Event | None) -> ExecResult:
        if not isinstance(request, ExecRequest):
            raise TypeError("execute() takes an ExecRequest")
        probe = self._ensure_started()
        limits = request.limits if request.limits is not None else self._limits
        return self._run(probe, request, limits, cancel)

    def _run(
        self,
        probe: _Probe,
        request: ExecRequest,
        limits: SandboxLimits,
        cancel: threading.Event | None,
    ) -> ExecResult:
        drop = self._drops_privileges()
        fresh = request.workdir is None
        if fresh:
            try:
                workdir = Path(
                    tempfile.mkdtemp(prefix="pacore-sandbox-", dir=self._temp_dir_root())
                )
            except OSError as exc:
                raise SandboxExecutionError(f"cannot create a workspace: {exc}") from exc
        else:
            assert request.workdir is not None
            workdir = request.workdir.resolve()
            if not workdir.is_dir():
                raise SandboxExecutionError(f"workspace {workdir} is not a directory")
        try:
            if drop:
                try:
                    _hand_over(workdir, self._uid, self._gid)
                except OSError as exc:
                    raise SandboxExecutionError(f"cannot hand over {workdir}: {exc}") from exc
            config = self._launch_config(probe, request, limits, workdir, drop)
            return _supervise(config, limits, self._grace, cancel)
        finally:
            if fresh:
                shutil.rmtree(workdir, ignore_errors=True)

    def _launch_config(
        self,
        probe: _Probe,
        request: ExecRequest,
        limits: SandboxLimits,
        workdir: Path,
        drop: bool,
    ) -> dict[str, Any]:
        path = _SYSTEM_PATH
        py_bin = os.path.dirname(probe.python)
        if py_bin not in _SYSTEM_PATH.split(":"):
            path = f"{py_bin}:{path}"
        env = {
            "PATH": path,
            "LANG": "C.UTF-8",
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "TERM": "dumb",
            **self._extra_env,
        }
        code_in_memfd = len(request.code.encode("utf-8", "surrogatepass")) > _ARGV_CODE_MAX
        if request.language == "python":
            if code_in_memfd:
                loader = "exec(compile(open({fd}).read(), '<string>', 'exec'))"
                argv = [probe.python, "-c", loader]
            else:
                argv = [probe.python, "-c", request.code]
        else:
            if probe.bash is None:
                raise SandboxExecutionError("bash is not installed on this machine")
            argv = [probe.bash, "--noprofile", "--norc"]
            argv += ["/proc/self/fd/{fd}"] if code_in_memfd else ["-c", request.code]
        # The launcher's own interpreter too: it runs on under the covers.
        needed = [*probe.python_paths, sys.base_prefix, sys.prefix, str(workdir)]
        if probe.bash is not None:
            needed.append(os.path.dirname(os.path.realpath(probe.bash)))
        # Only root can bind back what the sandbox uid cannot reach.
        covers = _covers(needed, self._uid, self._gid) if drop else []
        return {
            "argv": argv,
            "env": env,
            "workdir": str(workdir),
            "covers": covers,
            "stdin": request.stdin,
            "code": request.code if code_in_memfd else None,
            "uid": self._uid if drop else None,
            "gid": self._gid if drop else None,
            "network": limits.network,
            "require_isolation": limits.require_isolation,
            "cpu_time_s": limits.cpu_time_s,
            "memory_bytes": limits.memory_bytes,
            "max_processes": limits.max_processes,
            "max_file_bytes": limits.max_file_bytes,
            "max_open_files": limits.max_open_files,
            "shm_bytes": limits.shm_bytes,
        }


_PATHS_SCRIPT = (
    "import json, os, sys; print(json.dumps([os.path.realpath(sys.executable), sys.prefix,"
    " sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]))"
)


def _interpreter_paths(python: str) -> tuple[str, ...]:
    """The directories an interpreter reads at start-up and import (asked of it, as us).

    The interpreter is trusted (it is ours or the caller's choice), so it may
    run outside the sandbox to say where its prefix and packages live; those
    are what the sandbox must be able to reach.
    """
    out = subprocess.run(
        [python, "-c", _PATHS_SCRIPT],
        capture_output=True,
        check=True,
        timeout=30,
        env={"PATH": _SYSTEM_PATH, "LANG": "C.UTF-8"},
        cwd="/",
        stdin=subprocess.DEVNULL,
    ).stdout
    found: list[str] = []
    for entry in json.loads(out):
        if not isinstance(entry, str) or not os.path.isabs(entry):
            continue
        path = os.path.realpath(entry)
        if os.path.isfile(path):
            path = os.path.dirname(path)
        if os.path.isdir(path) and path not in found:
            found.append(path)
    return tuple(found)


def _searchable(st: os.stat_result, uid: int, gid: int) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _covers(paths: list[str], uid: int, gid: int) -> list[tuple[str, list[str]]]:
    """Which unsearchable directories to cover, and which paths to bind back under them.

    A venv whose base interpreter lives under ``/root`` (0700), or a workspace
    there, cannot be reached by ``nobody``. Inside the sandbox's mount
    namespace the launcher mounts an empty tmpfs over the topmost such
    directory and binds back just the needed paths, so the code reaches them
    and sees nothing else of, say, root's home.
    """
    groups: dict[str, list[str]] = {}
    for raw in paths:
        path = os.path.realpath(raw)
        blocked = None
        for ancestor in reversed(Path(path).parents):
            try:
                st = os.stat(ancestor)
            except OSError:
                break
            if not _searchable(st, uid, gid):
                blocked = str(ancestor)
                break
        if blocked is not None:
            groups.setdefault(blocked, []).append(path)
    result: list[tuple[str, list[str]]] = []
    for blocked in sorted(groups):
        items = sorted(set(groups[blocked]))
        minimal = [p for p in items if not any(p.startswith(q + "/") for q in items if q != p)]
        result.append((blocked, minimal))
    return result


def _hand_over(root: Path, uid: int, gid: int) -> None:
    """Give every entry of a workspace to the sandbox uid, never following symlinks.

    ``fwalk`` works on directory descriptors and ``lchown``-style calls, so a
    symlink the code planted (even one swapped in during the walk) can never
    make root chown something outside the workspace.
    """
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxExecutionError(f"workspace {root} is not a directory")
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.chown(root, uid, gid, follow_symlinks=False)
    for _path, dirs, files, dirfd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirs, *files):
            try:
                entry = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if (entry.st_uid, entry.st_gid) != (uid, gid):
                    os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                continue


# --------------------------------------------------------------------------- supervision


@dataclass
class _Capture:
    """Output kept so far; mutable, but local to one call."""

    limit: int
    stdout: bytearray = dataclasses.field(default_factory=bytearray)
    stderr: bytearray = dataclasses.field(default_factory=bytearray)
    status: bytearray = dataclasses.field(default_factory=bytearray)
    truncated: bool = False

    def add(self, which: str, data: bytes) -> bool:
        """Keep ``data``; False once the cap is reached (the rest is dropped)."""
        if which == "status":
            if len(self.status) < 1 * MIB:
                self.status += data
            return True
        room = self.limit - len(self.stdout) - len(self.stderr)
        target = self.stdout if which == "stdout" else self.stderr
        if len(data) > room:
            target += data[: max(room, 0)]
            self.truncated = True
            return False
        target += data
        return True


def _supervise(
    config: dict[str, Any],
    limits: SandboxLimits,
    grace: float,
    cancel: threading.Event | None,
) -> ExecResult:
    """Start the launcher, watch it, read its output under the cap, build the result."""
    cfg_r, cfg_w = os.pipe()
    status_r, status_w = os.pipe()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", __file__, _LAUNCH_FLAG, str(cfg_r), str(status_w)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(cfg_r, status_w),
            start_new_session=True,
            env={"PATH": _SYSTEM_PATH, "LANG": "C.UTF-8"},
            cwd="/",
        )
    except OSError as exc:
        for fd in (cfg_r, cfg_w, status_r, status_w):
            os.close(fd)
        raise SandboxUnavailableError(f"cannot start the sandbox launcher: {exc}") from exc
    os.close(cfg_r)
    os.close(status_w)
    pgid = proc.pid  # start_new_session: the launcher leads its own group
    killed_by: str | None = None
    capture = _Capture(limits.max_output_bytes)
    pidfd: int | None = None
    sel = selectors.DefaultSelector()
    try:
        # A thread, so that a launcher that never reads cannot block us: the
        # wall-time kill closes the pipe and ends the thread with EPIPE.
        payload = json.dumps(config).encode("utf-8", "surrogatepass")
        threading.Thread(target=_write_config, args=(cfg_w, payload), daemon=True).start()
        assert proc.stdout is not None and proc.stderr is not None
        streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        streams[status_r] = "status"
        for fd in streams:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(proc.pid)
            sel.register(pidfd, selectors.EVENT_READ)
        deadline = started + limits.wall_time_s
        kill_at: float | None = None  # when SIGKILL follows a SIGTERM
        drain_until: float | None = None  # after the launcher exits: stop reading by then
        open_fds = set(streams)
        while True:
            now = time.monotonic()
            exited = _has_exited(proc.pid)
            if exited and drain_until is None:
                # Nothing of the sandbox may outlive its launcher (the PID namespace
                # sees to that); without one, take the group down now, while the
                # unreaped launcher still pins the group id.
                _killpg(pgid, signal.SIGKILL)
                drain_until = now + 0.5
            if not open_fds and exited:
                break
            if drain_until is not None and now >= drain_until:
                break
            if killed_by is None and now >= deadline:
                killed_by = "wall_time"
                _killpg(pgid, signal.SIGTERM)
                kill_at = now + grace
            if killed_by is None and cancel is not None and cancel.is_set():
                killed_by = "cancelled"
                kill_at = now
            if kill_at is not None and now >= kill_at:
                _killpg(pgid, signal.SIGKILL)
                kill_at = None
                drain_until = now + 1.0 if drain_until is None else drain_until
            wake = [t for t in (deadline, kill_at, drain_until) if t is not None and t > now]
            timeout = min(wake) - now if wake else 0.05
            if cancel is not None or pidfd is None:
                timeout = min(timeout, 0.05)
            for key, _ in sel.select(max(timeout, 0.0)):
                fd = int(key.fd)
                if fd == pidfd:
                    sel.unregister(fd)
                    continue
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    continue
                if not capture.add(streams[fd], data) and killed_by is None:
                    killed_by = "output_limit"
                    _killpg(pgid, signal.SIGKILL)
                    drain_until = time.monotonic() + 0.5
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        os.close(status_r)
        _killpg(pgid, signal.SIGKILL)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    duration = time.monotonic() - started
    return _build_result(config, limits, capture, killed_by, duration, proc.returncode)


def _write_config(fd: int, payload: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
    except OSError:
        pass  # the launcher died before reading; its stderr says why


def _has_exited(pid: int) -> bool:
    """Whether the launcher has exited, without reaping it (its pid keeps the group id)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _build_result(
    config: dict[str, Any],
    limits: SandboxLimits,
    capture: _Capture,
    killed_by: str | None,
    duration: float,
    launcher_rc: int | None,
) -> ExecResult:
    events = []
    for line in bytes(capture.status).decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    iso_event = next((e for e in events if e.get("event") == "isolation"), None)
    exit_event = next((e for e in events if e.get("event") == "exit"), None)
    error_event = next((e for e in events if e.get("event") == "error"), None)
    stdout = bytes(capture.stdout).decode("utf-8", "replace")
    stderr = bytes(capture.stderr).decode("utf-8", "replace")
    if error_event is not None and killed_by is None:
        message = f"sandbox {error_event.get('stage')}: {error_event.get('message')}"
        if error_event.get("terminal"):
            raise SandboxUnavailableError(message)
        raise SandboxExecutionError(message)
    if iso_event is None and killed_by is None:
        tail = stderr.strip()[-2000:]
        raise SandboxExecutionError(
            f"the sandbox launcher failed (exit status {launcher_rc}): {tail or 'no output'}"
        )
    isolation = Isolation()
    if iso_event is not None:
        isolation = Isolation(
            network=bool(iso_event.get("network")),
            filesystem=bool(iso_event.get("filesystem")),
            processes=bool(iso_event.get("processes")),
            privileges_dropped=bool(iso_event.get("privileges_dropped")),
            uid=iso_event.get("uid"),
            notes=tuple(str(n) for n in iso_event.get("notes", ()))
            + tuple(str(e.get("text")) for e in events if e.get("event") == "note"),
        )
    exit_code: int | None = None
    cpu: float | None = None
    if exit_event is not None:
        cpu = float(exit_event.get("cpu_s", 0.0))
        if exit_event.get("signal") is None:
            exit_code = int(exit_event.get("code", 0))
        if killed_by is None:
            killed_by = _cause(exit_event, limits, exit_code, stderr)
    return ExecResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=exit_code,
        duration_s=duration,
        limits=limits,
        timed_out=killed_by in ("wall_time", "cpu_time"),
        output_truncated=capture.truncated,
        killed_by=killed_by,
        cpu_time_s=cpu,
        isolation=isolation,
    )


def _cause(
    exit_event: Mapping[str, Any], limits: SandboxLimits, exit_code: int | None, stderr: str
) -> str | None:
    """Name the limit (or signal) that ended a program the parent did not kill itself."""
    signum = exit_event.get("signal")
    if signum is not None:
        signum = int(signum)
        cpu = float(exit_event.get("cpu_s", 0.0))
        # SIGXCPU at the soft limit; SIGKILL at the hard one (soft + 1 s) if the
        # program ignored SIGXCPU. rusage is coarser than the kernel's check.
        if signum == signal.SIGXCPU or (
            signum == signal.SIGKILL and cpu >= 0.8 * limits.cpu_time_s
        ):
            return "cpu_time"
        if signum == signal.SIGXFSZ:
            return "file_size"
        try:
            return signal.Signals(signum).name
        except ValueError:
            return f"signal {signum}"
    if exit_code:
        tail = stderr[-4000:]
        if any(marker in tail for marker in _MEMORY_MARKERS):
            return "memory"
        if any(marker in tail for marker in _FILE_SIZE_MARKERS):
            return "file_size"
    return None


# --------------------------------------------------------------------------- launcher
#
# Everything below runs in the launcher process (``python -I -S this_file``),
# single-threaded, before and instead of the untrusted code. It uses the
# standard library only.

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_NOEXEC = 0x8
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2
_MOUNT_ATTR_NODEV = 0x4
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_SYS_MOUNT_SETATTR = 442  # same number on x86_64, arm64 and every asm-generic arch
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class _SetupError(Exception):
    def __init__(self, stage: str, message: str, *, terminal: bool) -> None:
        super().__init__(message)
        self.stage = stage
        self.terminal = terminal


class _Status:
    """JSON lines to the parent over a private pipe (closed on exec of the code)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **event: Any) -> None:
        data = (json.dumps(event) + "\n").encode()
        with contextlib.suppress(OSError):
            while data:
                data = data[os.write(self.fd, data) :]

    def fail(self, stage: str, message: str, *, terminal: bool) -> NoReturn:
        self.send(event="error", stage=stage, message=message, terminal=terminal)
        os._exit(125)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str
) -> None:
    result = libc.mount(
        source.encode() if source is not None else None,
        target.encode(),
        fstype.encode() if fstype is not None else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(result, f"mount {target}")


def _mount_setattr(
    libc: ctypes.CDLL, path: str, flags: int, *, attr_set: int = 0, attr_clr: int = 0
) -> None:
    if platform.machine() not in ("x86_64", "aarch64", "arm64", "riscv64", "loongarch64"):
        raise OSError(errno.ENOSYS, "mount_setattr: unknown syscall number on this machine")
    attr = _MountAttr(attr_set=attr_set, attr_clr=attr_clr, propagation=0, userns_fd=0)
    result = libc.syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(path.encode()),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(result, f"mount_setattr {path}")


def _prctl(libc: ctypes.CDLL, option: int, arg: int = 0) -> None:
    zero = ctypes.c_ulong(0)
    _check(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), zero, zero, zero), "prctl")


def _only_loopback() -> bool:
    """Verify the network namespace: loopback and nothing else, and bring loopback up."""
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        return False
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))
    return True


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _isolate(libc: ctypes.CDLL, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Enter the namespaces and lock the filesystem down; report what worked."""
    notes: list[str] = []
    want_net = not cfg["network"]
    as_root = os.geteuid() == 0
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | (_CLONE_NEWNET if want_net else 0)
    if not as_root:
        flags |= _CLONE_NEWUSER
    uid, gid = os.geteuid(), os.getegid()
    report: dict[str, Any] = {
        "network": False,
        "filesystem": False,
        "processes": False,
        "user_namespace": not as_root,
        "notes": notes,
    }
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        notes.append(f"cannot create namespaces: unshare: {os.strerror(err)}")
        return report
    if not as_root:
        try:
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            raise _SetupError("user namespace", str(exc), terminal=True) from exc
    try:  # nothing we mount below may propagate back to the host
        _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, "")
    except OSError as exc:
        raise _SetupError("mount namespace", str(exc), terminal=True) from exc
    report["processes"] = True
    if want_net:
        try:
            report["network"] = _only_loopback()
            if not report["network"]:
                notes.append("network namespace has interfaces other than loopback")
        except OSError as exc:
            notes.append(f"cannot inspect the network namespace: {exc}")
    workdir = cfg["workdir"]
    try:
        for blocked, items in cfg["covers"]:
            fds = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in items]
            _mount(libc, "tmpfs", blocked, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
            for item, fd in zip(items, fds, strict=True):
                os.makedirs(item, mode=0o755, exist_ok=True)
                _mount(libc, f"/proc/self/fd/{fd}", item, None, _MS_BIND | _MS_REC, "")
                os.close(fd)
        _mount(libc, workdir, workdir, None, _MS_BIND | _MS_REC, "")
        shm = "/dev/shm"
        private_shm = os.path.isdir(shm) and not (workdir + "/").startswith(shm + "/")
        if private_shm:
            size = int(cfg["shm_bytes"])
            _mount(libc, "tmpfs", shm, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777")
        _mount_setattr(libc, "/", _AT_RECURSIVE, attr_set=_MOUNT_ATTR_RDONLY)
        writable = _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV
        _mount_setattr(libc, workdir, 0, attr_clr=_MOUNT_ATTR_RDONLY, attr_set=writable)
        if private_shm:
            _mount_setattr(libc, shm, 0, attr_clr=_MOUNT_ATTR_RDONLY, attr_set=writable)
        # /proc guards itself by permissions, and the code's process must write its
        # own /proc/self/uid_map (the PID namespace mounts a fresh one over it anyway).
        with contextlib.suppress(OSError):
            _mount_setattr(libc, "/proc", 0, attr_clr=_MOUNT_ATTR_RDONLY)
        report["filesystem"] = True
    except OSError as exc:
        notes.append(f"cannot make the host filesystem read-only: {exc}")
    return report


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Leave no capability at all (needed in a user namespace, where we hold them all)."""
    for cap in range(64):
        with contextlib.suppress(OSError):
            _prctl(libc, _PR_CAPBSET_DROP, cap)
    zero = ctypes.c_ulong(0)
    clear_all = ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL)
    libc.prctl(ctypes.c_int(_PR_CAP_AMBIENT), clear_all, zero, zero, zero)  # best effort
    header = _CapHeader(version=0x20080522, pid=0)
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def _own_user_namespace(libc: ctypes.CDLL, uid: int, gid: int) -> bool:
    """Enter a user namespace of our own, mapping only ourselves (after dropping root).

    ``RLIMIT_NPROC`` is counted per user namespace (Linux >= 5.14), so this gives
    each sandbox its own process budget instead of one shared by every sandbox
    running as the same uid. The capabilities it grants inside are dropped next.
    """
    _prctl(libc, _PR_SET_DUMPABLE, 1)  # setuid made /proc/self root's; take it back
    if libc.unshare(ctypes.c_int(_CLONE_NEWUSER)) != 0:
        return False
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    return True


def _exec_code(libc: ctypes.CDLL, cfg: Mapping[str, Any], status: _Status) -> NoReturn:
    """Become the untrusted program: limits, privileges, then exec. Never returns."""
    stage = "signals"
    try:
        for signum in signal.valid_signals():
            if signum not in (signal.SIGKILL, signal.SIGSTOP):
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        with contextlib.suppress(OSError):
            _write_file("/proc/self/oom_score_adj", "1000")
        stage = "stdin"
        stdin_fd = os.memfd_create("stdin", 0)
        os.write(stdin_fd, cfg["stdin"].encode("utf-8", "surrogatepass"))
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        argv = list(cfg["argv"])
        if cfg["code"] is not None:
            code_fd = os.memfd_create("code", 0)
            os.write(code_fd, cfg["code"].encode("utf-8", "surrogatepass"))
            os.lseek(code_fd, 0, os.SEEK_SET)
            argv = [a.replace("{fd}", str(code_fd)) for a in argv]
        stage = "workspace"
        os.chdir(cfg["workdir"])
        stage = "limits"
        cpu = int(cfg["cpu_time_s"])
        for which, soft, hard in (
            (resource.RLIMIT_CORE, 0, 0),
            (resource.RLIMIT_CPU, cpu, cpu + 1),
            (resource.RLIMIT_AS, cfg["memory_bytes"], cfg["memory_bytes"]),
            (resource.RLIMIT_FSIZE, cfg["max_file_bytes"], cfg["max_file_bytes"]),
            (resource.RLIMIT_NOFILE, cfg["max_open_files"], cfg["max_open_files"]),
        ):
            resource.setrlimit(which, (int(soft), int(hard)))
        stage = "privileges"
        if cfg["uid"] is not None:
            os.setgroups([])
            os.setgid(int(cfg["gid"]))
            os.setuid(int(cfg["uid"]))
            if os.getresuid() != (cfg["uid"],) * 3 or os.getresgid() != (cfg["gid"],) * 3:
                raise OSError(errno.EPERM, "could not drop privileges")
            if _own_user_namespace(libc, int(cfg["uid"]), int(cfg["gid"])):
                _drop_capabilities(libc)
            else:
                status.send(
                    event="note",
                    text="process budget shared by all sandboxes of uid "
                    f"{cfg['uid']} (no user namespace)",
                )
        elif os.geteuid() != 0:
            _drop_capabilities(libc)
        # Lowered only now: a user namespace made above keeps the caller's limit as
        # its ceiling, so this budget counts this sandbox's processes alone.
        stage = "limits"
        nproc = int(cfg["max_processes"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1)
        stage = "exec"
        os.execve(argv[0], argv, dict(cfg["env"]))
    except (OSError, ValueError) as exc:  # ValueError: unencodable argv or environment
        terminal = stage in ("signals", "privileges")
        status.fail(stage, f"{exc}", terminal=terminal)


def _init(libc: ctypes.CDLL, cfg: Mapping[str, Any], status: _Status, pid_ns: bool) -> NoReturn:
    """PID 1 of the sandbox: start the code, reap orphans, report how the code ended."""
    try:
        _prctl(libc, _PR_SET_PDEATHSIG, signal.SIGKILL)
        if pid_ns:
            _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "")
    except OSError as exc:
        status.fail("proc", str(exc), terminal=True)
    started = time.monotonic()
    main = os.fork()
    if main == 0:
        _exec_code(libc, cfg, status)
    while True:
        try:
            pid, wstatus, usage = os.wait4(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if pid == main:
            break
    event: dict[str, Any] = {
        "event": "exit",
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": time.monotonic() - started,
    }
    if os.WIFSIGNALED(wstatus):
        event["signal"] = os.WTERMSIG(wstatus)
    else:
        event["code"] = os.waitstatus_to_exitcode(wstatus)
    status.send(**event)
    # Exiting as PID 1 makes the kernel SIGKILL whatever the code left behind.
    os._exit(0)


def _launcher_main(argv: list[str]) -> NoReturn:
    config_fd, status_fd = int(argv[0]), int(argv[1])
    os.set_inheritable(status_fd, False)
    os.umask(0o022)
    status = _Status(status_fd)
    with os.fdopen(config_fd, "rb") as f:
        cfg = json.loads(f.read().decode("utf-8", "surrogatepass"))
    libc = _libc()
    try:
        report = _isolate(libc, cfg)
    except _SetupError as exc:
        status.fail(exc.stage, str(exc), terminal=exc.terminal)
    dropped = cfg["uid"] is not None or os.geteuid() != 0
    report["privileges_dropped"] = dropped
    report["uid"] = cfg["uid"] if cfg["uid"] is not None else os.geteuid()
    status.send(event="isolation", **report)
    complete = report["filesystem"] and report["processes"] and dropped
    if cfg["require_isolation"] and not (complete and (cfg["network"] or report["network"])):
        reasons = "; ".join(report["notes"]) or "unknown reason"
        status.fail("isolation", f"isolation unavailable: {reasons}", terminal=True)
    # SIGTERM from the parent is for the code (a grace period to exit), not for us.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        _init(libc, cfg, status, report["processes"])
    os.close(status_fd)
    while True:
        try:
            os.waitpid(child, 0)
            break
        except ChildProcessError:
            break
    os._exit(0)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == _LAUNCH_FLAG:
    _launcher_main(sys.argv[2:])
