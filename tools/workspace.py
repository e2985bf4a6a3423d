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
import filecmp
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_DIFF_BYTES",
    "DEFAULT_MAX_DIFF_FILE_BYTES",
    "IGNORED_NAMES",
    "ApplyResult",
    "TreeDiff",
    "apply_diff",
    "changed_files",
    "copy_tree",
    "diff_trees",
    "list_tree",
    "quote_path",
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
    """Regular files of the tree by relative path; symlinks and ignored names left out.

    ``os.walk`` never follows a symlinked directory, so a link the code
    planted cannot make the walk leave the tree or loop.
    """
    out: dict[str, Path] = {}
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _ignored(d))
        for name in sorted(files):
            if _ignored(name):
                continue
            path = Path(top) / name
            if path.is_file() and not path.is_symlink():
                out[path.relative_to(root).as_posix()] = path
    return dict(sorted(out.items()))


def list_tree(root: Path) -> list[str]:
    """The tree's files as sorted relative paths (caches and VCS data left out)."""
    return list(_files(root))


def _differ(a: Path, b: Path) -> bool:
    """Whether two files differ; same size and modification time count as the same.

    Copies keep modification times (:func:`copy_tree`, the sandbox's copy in
    and back), so an untouched file is never read: how much the parent
    reads is bounded by what the code touched, not by the tree's size.
    """
    sa, sb = a.stat(), b.stat()
    if sa.st_size != sb.st_size:
        return True
    if sa.st_mtime_ns == sb.st_mtime_ns:
        return False
    return not filecmp.cmp(a, b, shallow=False)


def changed_files(original: Path, modified: Path) -> list[str]:
    """Relative paths that differ (added, removed or changed); compared in chunks."""
    a, b = _files(original), _files(modified)
    return sorted(p for p in set(a) | set(b) if p not in a or p not in b or _differ(a[p], b[p]))


# git's C-style quoting of a path (``core.quotePath``): what ``git apply`` reads back.
_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r",
            34: '\\"', 92: "\\\\"}  # fmt: skip


def quote_path(path: str) -> str:
    """``path`` as git writes it in a diff header: as is, or C-quoted in double quotes.

    A name holding a newline, a tab, a quote, a backslash or a non-ASCII or
    undecodable byte is quoted (``"a/x\\ny"``), so no file name can inject
    lines into a diff or make ``git apply`` refuse it.
    """
    raw = os.fsencode(path)
    if all(0x20 <= c < 0x7F and c not in (34, 92) for c in raw):
        return path
    out = []
    for c in raw:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append(f"\\{c:03o}")
    return '"' + "".join(out) + '"'


def _text_lines(path: Path | None) -> list[str] | None:
    """The file's lines, or None when it is not UTF-8 text (not diffable as text)."""
    if path is None:
        return []
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Lines end at "\n" only, as for git: str.splitlines would also cut at "\r",
    # form feeds or U+2028 and give hunks that match nothing.
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _with_newline(lines: Iterable[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:  # git's marker for a last line without newline
            out.append(line + "\n")
            out.append("\\ No newline at end of file\n")
    return out


DEFAULT_MAX_DIFF_BYTES = 1024 * 1024
"""Largest diff :func:`diff_trees` returns (1 MiB): whole files beyond are left out."""

DEFAULT_MAX_DIFF_FILE_BYTES = 1024 * 1024
"""Largest file diffed as text (1 MiB): bigger ones are left out, never read whole."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeDiff:
    """A diff of two trees that ``git apply`` accepts whole, and what it had to leave out.

    Every file in :attr:`text` is complete: a cap leaves whole files out
    (listed in :attr:`left_out` with the reason) instead of cutting one in
    the middle, so what is there always applies.
    """

    text: str
    left_out: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.left_out


def diff_trees(
    original: Path,
    modified: Path,
    *,
    max_bytes: int = DEFAULT_MAX_DIFF_BYTES,
    max_file_bytes: int = DEFAULT_MAX_DIFF_FILE_BYTES,
) -> TreeDiff:
    """A unified diff (``git apply`` format, ``a/`` and ``b/`` prefixes) of two trees.

    Memory stays bounded by the caps whatever the trees hold: a file over
    ``max_file_bytes`` is never read, and diffing stops adding files once the
    text would pass ``max_bytes``. Binary and non-UTF-8 files are left out
    too (a "Binary files differ" line would make ``git apply`` refuse the
    whole diff).
    """
    a, b = _files(original), _files(modified)
    chunks: list[str] = []
    size = 0
    left_out: list[str] = []
    for rel in changed_files(original, modified):
        old, new = a.get(rel), b.get(rel)
        name = quote_path(rel)
        if any(p is not None and p.stat().st_size > max_file_bytes for p in (old, new)):
            left_out.append(f"{name}: over {max_file_bytes} bytes, not diffed")
            continue
        old_lines, new_lines = _text_lines(old), _text_lines(new)
        if old_lines is None or new_lines is None:
            left_out.append(f"{name}: binary or not UTF-8, not diffed")
            continue
        header = f"diff --git {quote_path('a/' + rel)} {quote_path('b/' + rel)}\n"
        if old is None:
            header += "new file mode 100644\n"
        elif new is None:
            header += "deleted file mode 100644\n"
        body = difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile=quote_path("a/" + rel) if old is not None else "/dev/null",
            tofile=quote_path("b/" + rel) if new is not None else "/dev/null",
        )
        chunk = header + "".join(_with_newline(body))
        chunk_size = len(chunk.encode("utf-8"))
        if size + chunk_size > max_bytes:
            left_out.append(f"{name}: the diff would pass {max_bytes} bytes")
            continue
        chunks.append(chunk)
        size += chunk_size
    return TreeDiff(text="".join(chunks), left_out=tuple(left_out))


def tree_diff(original: Path, modified: Path) -> str:
    """The text of :func:`diff_trees` with its default caps."""
    return diff_trees(original, modified).text


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
