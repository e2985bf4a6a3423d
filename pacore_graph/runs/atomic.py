"""Files that appear complete or not at all.

Datasets and reports are read by scripts and CI; an interrupted write must
never leave a half file that a later step silently consumes. Write beside the
target, then rename over it. A write that fails (a full disk) leaves the
target as it was and raises an ``OSError`` naming the target, not the
temporary file beside it. The file is ``0600`` and new folders ``0700``
(:mod:`pacore_graph.runs.private_files`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from pacore_graph.runs.private_files import FILE_MODE, private_dir

__all__ = ["write_lines_atomic", "write_text_atomic"]


def _replace_atomically(path: str | Path, write: Callable[[TextIO], None]) -> None:
    """Run ``write`` on a temporary file beside ``path``, then rename it over ``path``.

    On any failure the temporary file is removed and ``path`` is left as it
    was; an ``OSError`` is raised again naming ``path``, not the temporary.
    """
    target = Path(path)
    private_dir(target.parent)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            write(fh)
        # mkstemp creates 0600, and it stays so: what a run writes is private (issue 31).
        os.chmod(tmp_name, FILE_MODE)
        os.replace(tmp_name, target)
    except BaseException as exc:
        Path(tmp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        raise


def write_lines_atomic(path: str | Path, lines: Iterable[str]) -> int:
    """Write ``lines`` (each given without its newline) atomically; return how many."""
    count = 0

    def write(fh: TextIO) -> None:
        nonlocal count
        for line in lines:
            fh.write(line + "\n")
            count += 1

    _replace_atomically(path, write)
    return count


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` atomically (no newline is added)."""

    def write(fh: TextIO) -> None:
        fh.write(text)

    _replace_atomically(path, write)
