"""The parent side of one call: start the launcher, enforce wall time and output, build the result.

The parent reads stdout, stderr and the launcher's status lines with
``selectors`` (never blocking on a full pipe), stops at the output cap, and on
time-out sends ``SIGTERM`` to the process group, then, after a short grace,
``SIGKILL`` to the sandbox's init (which takes the whole PID namespace with
it) or, without one, to the group. The launcher then copies the workspace
back, for at most ``sync_grace_s``; after that, or when the launcher exits,
the whole group is killed. Every wait is bounded, so the parent always
returns, and the launcher dies with the parent should the parent be killed
(it holds ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SandboxExecutionError, SandboxUnavailableError
from .launcher import LAUNCH_FLAG
from .limits import MIB, SandboxLimits
from .paths import SYSTEM_PATH
from .values import ExecResult, Isolation

__all__ = ["SYNC_GRACE_S", "supervise"]

SYNC_GRACE_S = 30.0
"""How long the launcher may take to copy the workspace back after the code was killed."""

_LAUNCHER = str(Path(__file__).with_name("launcher.py"))

# Markers of an allocation failure / a file-size failure / a full workspace in stderr.
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FILE_SIZE_MARKERS = ("File too large", "File size limit exceeded")
_WORKSPACE_MARKERS = ("No space left on device", "Disk quota exceeded")


@dataclass
class _Capture:
    """Output and status events kept so far; mutable, but local to one call."""

    limit: int
    stdout: bytearray = dataclasses.field(default_factory=bytearray)
    stderr: bytearray = dataclasses.field(default_factory=bytearray)
    status: bytearray = dataclasses.field(default_factory=bytearray)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    truncated: bool = False

    def add(self, which: str, data: bytes) -> bool:
        """Keep ``data``; False once the cap is reached (the rest is dropped)."""
        if which == "status":
            if len(self.status) < 1 * MIB:
                self.status += data
                *lines, rest = bytes(self.status).split(b"\n")
                self.status = bytearray(rest)
                for line in lines:
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if isinstance(event, dict):
                            self.events.append(event)
            return True
        room = self.limit - len(self.stdout) - len(self.stderr)
        target = self.stdout if which == "stdout" else self.stderr
        if len(data) > room:
            target += data[: max(room, 0)]
            self.truncated = True
            return False
        target += data
        return True

    def event(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == name), None)


class _Group:
    """The launcher's process group and, once known, the sandbox's init (by pidfd)."""

    def __init__(self, pgid: int, capture: _Capture, sync_back: bool) -> None:
        self.pgid = pgid
        self.capture = capture
        self.sync_back = sync_back
        self._init_fd: int | None = None
        self._init_checked = False

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def kill_code(self) -> bool:
        """SIGKILL the code; True when the launcher survives it to copy the workspace back."""
        fd = self._init()
        if fd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            return True
        self.signal_group(signal.SIGKILL)
        return False

    def _init(self) -> int | None:
        if self._init_checked:
            return self._init_fd
        iso = self.capture.event("isolation")
        init = self.capture.event("init")
        if iso is None or init is None:
            return None  # not started yet: the group is all there is
        self._init_checked = True
        if self.sync_back and iso.get("workspace_limited") and iso.get("processes"):
            with contextlib.suppress(OSError):
                self._init_fd = os.pidfd_open(int(init["pid"]))
        return self._init_fd

    def close(self) -> None:
        if self._init_fd is not None:
            os.close(self._init_fd)
            self._init_fd = None


def supervise(
    config: dict[str, Any],
    limits: SandboxLimits,
    grace: float,
    cancel: threading.Event | None,
    *,
    sync_grace_s: float = SYNC_GRACE_S,
) -> ExecResult:
    """Start the launcher, watch it, read its output under the cap, build the result."""
    cfg_r, cfg_w = os.pipe()
    status_r, status_w = os.pipe()
    started = time.monotonic()
    argv = [sys.executable, "-I", "-S", "-B", _LAUNCHER, LAUNCH_FLAG]
    try:
        proc = subprocess.Popen(
            [*argv, str(cfg_r), str(status_w), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(cfg_r, status_w),
            start_new_session=True,
            env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
            cwd="/",
        )
    except OSError as exc:
        for fd in (cfg_r, cfg_w, status_r, status_w):
            os.close(fd)
        raise SandboxUnavailableError(f"cannot start the sandbox launcher: {exc}") from exc
    os.close(cfg_r)
    os.close(status_w)
    killed_by: str | None = None
    capture = _Capture(limits.max_output_bytes)
    group = _Group(proc.pid, capture, bool(config.get("sync_back")))  # leads its own group
    pidfd: int | None = None
    sel = selectors.DefaultSelector()
    try:
        # A thread, so that a launcher that never reads cannot block us: the
        # wall-time kill closes the pipe and ends the thread with EPIPE.
        payload = json.dumps(config).encode("utf-8")
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
        drain_until: float | None = None  # stop reading by then
        open_fds = set(streams)

        def kill_code(now: float) -> float:
            """Kill the code; by when the launcher must be done (copying back, draining)."""
            return now + (sync_grace_s if group.kill_code() else 1.0)

        while True:
            now = time.monotonic()
            exited = _has_exited(proc.pid)
            if exited and (drain_until is None or drain_until > now + 0.5):
                # Nothing of the sandbox may outlive its launcher (the PID namespace
                # sees to that); without one, take the group down now, while the
                # unreaped launcher still pins the group id.
                group.signal_group(signal.SIGKILL)
                drain_until = now + 0.5
            if not open_fds and exited:
                break
            if drain_until is not None and now >= drain_until:
                break
            if killed_by is None and now >= deadline:
                killed_by = "wall_time"
                group.signal_group(signal.SIGTERM)
                kill_at = now + grace
            if killed_by is None and cancel is not None and cancel.is_set():
                killed_by = "cancelled"
                kill_at = now
            if kill_at is not None and now >= kill_at:
                kill_at = None
                drain_until = kill_code(now) if drain_until is None else drain_until
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
                    drain_until = kill_code(time.monotonic())
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        group.close()
        os.close(status_r)
        group.signal_group(signal.SIGKILL)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    duration = time.monotonic() - started
    return _build_result(limits, capture, killed_by, duration, proc.returncode)


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


def _build_result(
    limits: SandboxLimits,
    capture: _Capture,
    killed_by: str | None,
    duration: float,
    launcher_rc: int | None,
) -> ExecResult:
    capture.add("status", b"\n")  # a last line without its newline
    iso_event = capture.event("isolation")
    exit_event = capture.event("exit")
    error_event = capture.event("error")
    sync_error = capture.event("sync_error")
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
    if sync_error is not None:
        stderr += f"\n[sandbox: {sync_error.get('message')}]\n"
    isolation = Isolation()
    if iso_event is not None:
        isolation = Isolation(
            network=bool(iso_event.get("network")),
            filesystem=bool(iso_event.get("filesystem")),
            processes=bool(iso_event.get("processes")),
            privileges_dropped=bool(iso_event.get("privileges_dropped")),
            workspace_limited=bool(iso_event.get("workspace_limited")),
            uid=iso_event.get("uid"),
            notes=tuple(str(n) for n in iso_event.get("notes", ()))
            + tuple(str(e.get("text")) for e in capture.events if e.get("event") == "note"),
        )
    exit_code: int | None = None
    cpu: float | None = None
    peak: int | None = None
    if exit_event is not None:
        cpu = float(exit_event.get("cpu_s", 0.0))
        if exit_event.get("peak_anon_bytes") is not None and isolation.processes:
            peak = int(exit_event["peak_anon_bytes"])
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
        peak_memory_bytes=peak,
    )


def _cause(
    exit_event: Mapping[str, Any], limits: SandboxLimits, exit_code: int | None, stderr: str
) -> str | None:
    """Name the limit (or signal) that ended a program the parent did not kill itself."""
    if exit_event.get("killed_by"):
        return str(exit_event["killed_by"])  # init's own verdict (total memory)
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
        if any(marker in tail for marker in _WORKSPACE_MARKERS):
            return "workspace_full"
    return None
