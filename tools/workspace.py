"""Repository workspaces for SWE-style explorers: copy, diff, apply.

Every explorer of a SWE round edits its own copy of the repository, so
parallel attempts never see each other's half-made changes; what an attempt
produced is the unified diff between the original tree and its copy. Diffs
are made with :mod:`difflib` (no git repository needed) in the format
``git apply`` reads, which is also how the final diff is verified: applied to
a fresh copy, then tested.
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IGNORED_NAMES",
    "ApplyResult",
    "apply_diff",
    "changed_files",
    "copy_tree",
    "list_tree",
    "tree_diff",
]

#: Directories and files that are never copied or diffed: caches, VCS data,
#: virtual environments. They are large and never part of a fix.
IGNORED_NAMES = frozenset(
    {
        ".git",
        "__pycache__",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "node_modules",
        ".tox",
        "*.egg-info",
    }
)


def _ignored(name: str) -> bool:
    return name in IGNORED_NAMES or name.endswith((".pyc", ".egg-info"))


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy a repository without caches or VCS data; symlinks are copied as links."""
    shutil.copytree(
        src,
        dst,
        symlinks=True,
        ignore=lambda _dir, names: [n for n in names if _ignored(n)],
        dirs_exist_ok=True,
    )
    return dst


def _files(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(_ignored(part) for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink():
            out[rel.as_posix()] = path
    return out


def list_tree(root: Path) -> list[str]:
    """The tree's files as sorted relative paths (caches and VCS data left out)."""
    return list(_files(root))


def _lines(path: Path | None) -> list[str] | None:
    """The file's lines, or None for a binary file (diffed as 'binary files differ')."""
    if path is None:
        return []
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def _with_newline(lines: Iterable[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:  # git's marker for a last line without newline
            out.append(line + "\n")
            out.append("\\ No newline at end of file\n")
    return out


def changed_files(original: Path, modified: Path) -> list[str]:
    """Relative paths that differ (added, removed or changed)."""
    a, b = _files(original), _files(modified)
    return sorted(
        p
        for p in set(a) | set(b)
        if p not in a or p not in b or a[p].read_bytes() != b[p].read_bytes()
    )


def tree_diff(original: Path, modified: Path) -> str:
    """A unified diff (``git apply`` format, ``a/`` and ``b/`` prefixes) of two trees."""
    a, b = _files(original), _files(modified)
    chunks: list[str] = []
    for rel in changed_files(original, modified):
        old, new = a.get(rel), b.get(rel)
        old_lines, new_lines = _lines(old), _lines(new)
        header = f"diff --git a/{rel} b/{rel}\n"
        if old is None:
            header += "new file mode 100644\n"
        elif new is None:
            header += "deleted file mode 100644\n"
        if old_lines is None or new_lines is None:
            chunks.append(header + f"Binary files a/{rel} and b/{rel} differ\n")
            continue
        body = difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile=f"a/{rel}" if old is not None else "/dev/null",
            tofile=f"b/{rel}" if new is not None else "/dev/null",
        )
        chunks.append(header + "".join(_with_newline(body)))
    return "".join(chunks)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyResult:
    """Whether a diff applied cleanly, and what ``git apply`` said if not."""

    applied: bool
    message: str = ""


def apply_diff(diff: str, root: Path, *, timeout: float = 60.0) -> ApplyResult:
    """Apply a unified diff to ``root`` with ``git apply`` (no repository needed)."""
    if not diff.strip():
        return ApplyResult(applied=False, message="empty diff")
    try:
        proc = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "--recount", "-"],
            input=diff,
            text=True,
            cwd=root,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return ApplyResult(applied=False, message="git is not installed")
    except subprocess.TimeoutExpired:
        return ApplyResult(applied=False, message=f"git apply timed out after {timeout}s")
    if proc.returncode != 0:
        return ApplyResult(applied=False, message=(proc.stderr or proc.stdout).strip())
    return ApplyResult(applied=True)
