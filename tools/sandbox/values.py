"""The plain values that cross the executor protocol: request, isolation report, result.

Ordinary outcomes of running code are *results*, not exceptions: a time-out,
a crash, output cut at the cap or a blown memory limit come back as an
:class:`ExecResult` the model can read and react to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .limits import MIB, SandboxLimits

__all__ = ["LANGUAGES", "ExecRequest", "ExecResult", "Isolation", "Language"]

Language = Literal["python", "bash"]
"""``python``: a snippet run with the sandbox's Python. ``bash``: a shell command."""

LANGUAGES: tuple[str, ...] = ("python", "bash")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecRequest:
    """One piece of code to run.

    ``workdir`` is a workspace that persists between calls (a repository copy,
    say); without it every call gets a fresh temporary directory that is
    deleted afterwards. ``limits`` replaces the executor's defaults for this
    call only. The code works on a copy of ``workdir`` that is mirrored back
    when the call ends, so two calls running at once on the same ``workdir``
    do not see each other's changes, and the one that ends last wins.
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
            raise ValueError("code must not contain NUL characters")
        _check_encodable("code", self.code)
        if self.language not in LANGUAGES:
            raise ValueError(f"ExecRequest.language must be one of {LANGUAGES}")
        if not isinstance(self.stdin, str):
            raise TypeError("ExecRequest.stdin must be a str")
        _check_encodable("stdin", self.stdin)
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
    """A root of its own: the workspace writable, the system's and the interpreter's
    directories read-only, nothing else of the host (see the package docstring)."""

    processes: bool = False
    """New PID namespace: host processes invisible; every leftover process killed at exit."""

    privileges_dropped: bool = False
    """The code ran without root and without capabilities (as ``uid``)."""

    workspace_limited: bool = False
    """The workspace was a tmpfs of :attr:`SandboxLimits.max_workspace_bytes`."""

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
    ``"memory"``, ``"file_size"`` or ``"workspace_full"`` (the last three
    inferred from its error output when the program turned the limit into an
    error), ``"total_memory"`` (all processes together over
    :attr:`SandboxLimits.max_total_memory_bytes`), or a signal name
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
    peak_memory_bytes: int | None = None
    """Highest total ``RssAnon`` of the call's processes that init saw (None: not watched)."""

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
        elif self.killed_by == "total_memory":
            total = _size(self.limits.max_total_memory_bytes)
            parts.append(f"out of memory: killed over {total} for all processes together")
        elif self.killed_by == "workspace_full":
            size = _size(self.limits.max_workspace_bytes)
            parts.append(f"workspace full: limit {size} for all files together")
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


def _check_encodable(name: str, text: str) -> None:
    """Refuse text that cannot become UTF-8 (lone surrogates), with where it fails."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{name} is not valid Unicode text: lone surrogate at character {exc.start}"
        ) from None


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
