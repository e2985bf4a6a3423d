"""The default backend: :class:`LocalSandbox` runs code in a contained subprocess here.

The parent side of a call lives in :mod:`.supervise`, the child side in
:mod:`.launcher`; this module finds an interpreter that works inside the
sandbox, checks the workspace and builds the launcher's configuration.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SandboxExecutionError, SandboxUnavailableError
from .limits import DEFAULT_SANDBOX_GID, DEFAULT_SANDBOX_UID, SandboxLimits
from .paths import SYSTEM_PATH, check_workdir, interpreter_paths, root_plan
from .protocol import BaseCodeExecutor
from .supervise import supervise
from .values import ExecRequest, ExecResult, Isolation

__all__ = ["LocalSandbox"]

# Code longer than this goes through an in-memory file instead of argv
# (one argv string may be at most 128 KiB on Linux).
_ARGV_CODE_MAX = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Probe:
    python: str
    root: dict[str, Any]
    """What the sandbox's root holds besides the workspace (:func:`.paths.root_plan`)."""
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
    as root: the code runs as that uid and works on a copy of the workspace
    owned by it (a tmpfs; the host workspace is never chowned), into which
    only what that uid could read on the host is copied.
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
        bash = shutil.which("bash", path=SYSTEM_PATH)
        failures: list[str] = []
        for candidate in self._python_candidates():
            try:
                paths = interpreter_paths(candidate)
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                failures.append(f"{candidate}: {exc}")
                continue
            needed = [*paths]
            if bash is not None:
                needed.append(os.path.dirname(os.path.realpath(bash)))
            root = root_plan(needed)
            probe = _Probe(python=candidate, root=root, bash=bash, isolation=Isolation())
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
            check_workdir(workdir)
        try:
            config = self._launch_config(probe, request, limits, workdir, drop)
            config["sync_back"] = not fresh
            return supervise(config, limits, self._grace, cancel)
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
        path = SYSTEM_PATH
        py_bin = os.path.dirname(probe.python)
        if py_bin not in SYSTEM_PATH.split(":"):
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
        code_in_memfd = len(request.code.encode("utf-8")) > _ARGV_CODE_MAX
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
        return {
            "argv": argv,
            "env": env,
            "workdir": str(workdir),
            "root": probe.root,
            "stdin": request.stdin,
            "code": request.code if code_in_memfd else None,
            "uid": self._uid if drop else None,
            "gid": self._gid if drop else None,
            "network": limits.network,
            "require_isolation": limits.require_isolation,
            "cpu_time_s": limits.cpu_time_s,
            "memory_bytes": limits.memory_bytes,
            "max_total_memory_bytes": limits.max_total_memory_bytes,
            "max_workspace_bytes": limits.max_workspace_bytes,
            "max_processes": limits.max_processes,
            "max_file_bytes": limits.max_file_bytes,
            "max_open_files": limits.max_open_files,
            "shm_bytes": limits.shm_bytes,
        }
