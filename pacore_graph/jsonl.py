"""Append-only JSONL result files that survive interruptions.

``pacore run --output`` and ``pacore eval`` write one line per finished run
and resume from what is there. A run killed mid-write leaves a last line with
no newline; appending to it would glue the next result onto the cut one and
lose both (and redo that run on every later resume), so the sink ends a cut
line before writing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["ends_cut", "iter_objects", "open_append"]


def ends_cut(path: Path) -> bool:
    """True when the file's last line has no newline: a write cut by an interruption."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


def open_append(path: Path) -> IO[str]:
    """Open ``path`` for appending lines, first ending a cut last line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = ends_cut(path)
    sink = open(path, "a", encoding="utf-8")  # noqa: SIM115 (returned to the caller)
    if cut:
        sink.write("\n")
    return sink


def iter_objects(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a result file, skipping lines an interruption cut (or no file)."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        for text in fh:
            try:
                data = json.loads(text)
            except ValueError:
                continue  # a cut line: that run did not finish, so it runs again
            if isinstance(data, dict):
                yield data
