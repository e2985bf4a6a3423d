"""Host paths as the sandbox sees them: what the interpreter needs, how to reach it, which
workspaces are refused.

Everything here runs in the parent, on trusted inputs (our interpreter, the
caller's workspace path), before any untrusted code starts.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from .errors import SandboxExecutionError

__all__ = ["SYSTEM_PATH", "check_workdir", "covers", "interpreter_paths", "searchable"]

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
    "import json, os, sys; print(json.dumps([os.path.realpath(sys.executable), sys.prefix,"
    " sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]))"
)


def interpreter_paths(python: str) -> tuple[str, ...]:
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
        env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
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


def searchable(st: os.stat_result, uid: int, gid: int) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def covers(paths: list[str], uid: int, gid: int) -> list[tuple[str, list[str]]]:
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
            if not searchable(st, uid, gid):
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
