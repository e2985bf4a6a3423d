"""What one execution may use: :class:`SandboxLimits` and the units they are written in.

Kept apart from the rest of the sandbox because every layer reads them: the
request and result values, the parent that supervises a call and the
launcher configuration built from them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_SANDBOX_GID", "DEFAULT_SANDBOX_UID", "MIB", "SandboxLimits"]

MIB = 1024 * 1024
"""One mebibyte, for writing limits."""

DEFAULT_SANDBOX_UID = 65534
"""``nobody`` on Debian: the uid code runs as when the sandbox is started by root."""

DEFAULT_SANDBOX_GID = 65534
"""``nogroup`` on Debian."""


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

    max_total_memory_bytes: int = 1024 * MIB
    """Resident anonymous memory of all the call's processes together (default 1 GiB).

    Watched by the sandbox's init, which kills the whole call (``killed_by``
    ``"memory"``) once the sum of ``RssAnon`` over its processes passes this;
    see the package docstring for what that does and does not count.
    """

    max_processes: int = 64
    """Processes and threads at once (``RLIMIT_NPROC``, default 64): stops fork bombs.

    Counted per sandbox where user namespaces are available (see the module
    docstring), else across all sandboxes of the same uid.
    """

    max_file_bytes: int = 16 * MIB
    """Largest file the code may write (``RLIMIT_FSIZE``, default 16 MiB)."""

    max_workspace_bytes: int = 256 * MIB
    """Size of the whole workspace during a call (default 256 MiB).

    The workspace is a size-limited tmpfs in the sandbox's own mount
    namespace: writes beyond fail with ``ENOSPC`` (``killed_by``
    ``"workspace_full"`` when that ends the program), and so does a file
    beyond one per 16 KiB of the cap (at least 1,024). A given ``workdir`` is
    copied in before and back after the call, so it must fit too. The tmpfs
    lives in memory, so this is also memory the call can use.
    """

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
            "max_total_memory_bytes",
            "max_processes",
            "max_file_bytes",
            "max_workspace_bytes",
            "max_output_bytes",
            "max_open_files",
            "shm_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.memory_bytes < 32 * MIB:
            raise ValueError("SandboxLimits.memory_bytes below 32 MiB cannot start an interpreter")
        if self.max_total_memory_bytes < 32 * MIB:
            raise ValueError("SandboxLimits.max_total_memory_bytes below 32 MiB cannot start one")
        if self.max_open_files < 16:
            raise ValueError("SandboxLimits.max_open_files must be at least 16")
        for name in ("network", "require_isolation"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"SandboxLimits.{name} must be a bool")

    def replace(self, **changes: Any) -> SandboxLimits:
        """A copy with some limits changed (validated like the original)."""
        return dataclasses.replace(self, **changes)
