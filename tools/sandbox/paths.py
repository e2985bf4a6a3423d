"""Host paths as the sandbox sees them: what its own root holds, which workspaces are refused.

Everything here runs in the parent, on trusted inputs (our interpreter, the
caller's workspace path), before any untrusted code starts.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import SandboxExecutionError, SandboxUnavailableError

__all__ = ["SYSTEM_ENTRIES", "SYSTEM_PATH", "check_workdir", "interpreter_paths", "root_plan"]

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""A standard PATH; the sandbox Python's own bin directory (a venv's) goes first."""

# Directories that are never a workspace: the code could rewrite (or, through
# the copy back, replace) the system or a user's whole home.
_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run",
     "/sbin", "/sys", "/usr", "/var", "/home", "/opt", "/srv", "/mnt", "/media"}
)  # fmt: skip


def check_workdir(workdir: Path) -> None:
    """Refuse ``/``, system directories, and any home directory or one that holds it.

    ``workdir`` is resolved. A workspace is copied into the sandbox and the
    result copied back, so a home directory would be exposed to the code and
    then rewritten by it; that is never what a caller meant.
    """
    path = str(workdir)
    homes = {os.path.realpath(os.path.expanduser("~"))}
    if os.environ.get("HOME"):
        homes.add(os.path.realpath(os.environ["HOME"]))
    if path in _SYSTEM_DIRS:
        raise SandboxExecutionError(f"workspace {path} refused: a system directory")
    for home in homes:
        if home == path or home.startswith(path.rstrip("/") + "/"):
            raise SandboxExecutionError(f"workspace {path} refused: it is or holds {home}")


_PATHS_SCRIPT = (
    "import json, os, sys; print(json.dumps({'exe': os.path.realpath(sys.executable),"
    " 'prefixes': [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],"
    " 'path': sys.path}))"
)

#: Host entries every sandbox root holds, read-only, when they exist here: the
#: system's programs and libraries, the dynamic loader's cache (libraries outside
#: its built-in directories), the time zone, and Debian's alternatives
#: (``/usr/bin/awk`` and the like are links through ``/etc/alternatives``). A
#: symlink (``/bin -> usr/bin`` on a merged-/usr system) is recreated as one.
SYSTEM_ENTRIES = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives",
)  # fmt: skip

_SITE_DIRS = ("site-packages", "dist-packages")


def interpreter_paths(python: str) -> tuple[str, ...]:
    """The directories an interpreter needs at start-up and import (asked of it, as us).

    The interpreter is trusted (it is ours or the caller's choice), so it may
    run outside the sandbox to say where it lives: its executable's directory,
    its prefixes (a venv's and the base installation's) and the entries of
    ``sys.path`` that are package directories: inside a prefix, or a
    ``site-packages``/``dist-packages`` folder (a ``.pth`` overlay's included).
    Other ``sys.path`` entries, such as the source tree of an editable install
    or a folder a ``.pth`` file adds, are left out on purpose: the code must
    not read the project it is graded by. Both the real path and the path as
    given are kept when they differ (a venv reached through a symlink), so the
    interpreter finds itself by either name.
    """
    out = subprocess.run(
        [python, "-c", _PATHS_SCRIPT],
        capture_output=True,
        check=True,
        timeout=30,
        env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
        cwd="/",
        stdin=subprocess.DEVNULL,
    ).stdout
    info = json.loads(out)
    prefixes = [p for p in info["prefixes"] if isinstance(p, str) and os.path.isabs(p)]
    real_prefixes = [os.path.realpath(p) for p in prefixes]
    wanted = [os.path.dirname(info["exe"]), os.path.dirname(os.path.abspath(python))]
    wanted += prefixes
    for entry in info["path"]:
        if not isinstance(entry, str) or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        inside = any(real == p or real.startswith(p.rstrip("/") + "/") for p in real_prefixes)
        if inside or os.path.basename(real.rstrip("/")) in _SITE_DIRS:
            wanted.append(entry)
    found: list[str] = []
    for entry in wanted:
        for path in (os.path.normpath(entry), os.path.realpath(entry)):
            if os.path.isdir(path) and path not in found:
                found.append(path)
    return tuple(found)


def _exposes(path: str) -> str | None:
    """Why binding ``path`` whole into the sandbox would expose too much, or None."""
    if path == "/" or path in _SYSTEM_DIRS - {"/usr", "/bin", "/sbin", "/lib", "/lib64"}:
        return "a system directory"
    homes = {os.path.realpath(os.path.expanduser("~"))}
    if os.environ.get("HOME"):
        homes.add(os.path.realpath(os.environ["HOME"]))
    for home in homes:
        if home == path or home.startswith(path.rstrip("/") + "/"):
            return f"it is or holds {home}"
    return None


def root_plan(needed: Iterable[str]) -> dict[str, Any]:
    """What the sandbox's own root holds besides the workspace, as the launcher takes it.

    ``binds`` are ``[target, source]`` pairs of host directories and files
    mounted read-only at the same path (the :data:`SYSTEM_ENTRIES` that exist,
    then each of ``needed`` not already inside one of them); ``symlinks`` are
    ``[path, target]`` pairs recreated as on the host. Raises
    :class:`SandboxUnavailableError` for a needed directory that would expose
    ``/``, a system directory or a home directory whole (an interpreter
    installed there): the sandbox then refuses to start rather than show it.
    """
    binds: list[list[str]] = []
    symlinks: list[list[str]] = []
    covered: list[str] = []

    def inside(path: str) -> bool:
        return any(path == c or path.startswith(c.rstrip("/") + "/") for c in covered)

    for entry in SYSTEM_ENTRIES:
        if os.path.islink(entry):
            symlinks.append([entry, os.readlink(entry)])
        elif os.path.exists(entry):
            binds.append([entry, entry])
            covered.append(entry)
    for entry in sorted({os.path.normpath(p) for p in needed}, key=len):
        if inside(entry) or inside(os.path.realpath(entry)):
            continue
        real = os.path.realpath(entry)
        why = _exposes(real) or _exposes(entry)
        if why is not None:
            raise SandboxUnavailableError(
                f"the interpreter needs {entry}, which the sandbox will not show whole ({why})"
            )
        binds.append([entry, real])
        covered.append(entry)
    return {"binds": binds, "symlinks": symlinks}
