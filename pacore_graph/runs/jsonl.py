"""JSONL files: the one reader (with one error policy) and the append-only sink.

**Reading.** Every JSONL file the package reads (datasets, ``pacore run`` and
``pacore eval`` results, training pools) goes through :func:`read_lines`. Its
policy is the same everywhere: a line that cannot be used never aborts the
file and is never dropped silently; it comes out as a :class:`BadLine` with
its 1-based line number and the reason, between the good lines, and the
caller decides what to do (report it, count it, or refuse the file). Bad means:
bytes that are not UTF-8, text that is not JSON, JSON that is not an object,
or strings holding lone surrogates (a ``"\\ud800"`` escape), which no server
can be sent. Blank lines are not lines of data and are skipped.

**Appending.** ``pacore run --output`` and ``pacore eval`` write one line per
finished run and resume from what is there. A run killed mid-write leaves a
last line with no newline; appending to it would glue the next result onto
the cut one and lose both, so :func:`open_append` ends a cut line first.
Each line goes to the file in one unbuffered write, so a line is either
written or the write fails at once; a failure (a full disk) raises an
``OSError`` naming the file, and nothing is left in a buffer to fail again
when the file is closed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "BadLine",
    "JsonLine",
    "LineSink",
    "dumps_line",
    "ends_cut",
    "iter_objects",
    "open_append",
    "parse_line",
    "read_lines",
    "unicode_problem",
    "write_lines",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BadLine:
    """A line of an input file that could not be used, and why."""

    line: int
    reason: str

    @property
    def message(self) -> str:
        """The reason (the name dataset errors used)."""
        return self.reason

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True, slots=True, kw_only=True)
class JsonLine:
    """A line that holds a JSON object."""

    line: int
    data: dict[str, Any]


def unicode_problem(value: Any) -> str | None:
    """Where ``value`` holds a string that is not valid Unicode (a lone surrogate), or None."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate (e.g. a \\ud800 escape) at character {exc.start}"
    return None


def parse_line(raw: bytes, lineno: int) -> JsonLine | BadLine | None:
    """One raw line as an object or a :class:`BadLine`; None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = raw[exc.start : exc.start + 1].hex()
        return BadLine(
            line=lineno, reason=f"not UTF-8 text (byte 0x{byte} at column {exc.start + 1})"
        )
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return BadLine(line=lineno, reason=f"not valid JSON ({exc})")
    if not isinstance(data, dict):
        return BadLine(line=lineno, reason=f"expected a JSON object, got {type(data).__name__}")
    problem = unicode_problem(data)
    if problem is not None:
        return BadLine(line=lineno, reason=f"not valid text: {problem}")
    return JsonLine(line=lineno, data=data)


def read_lines(path: str | Path) -> Iterator[JsonLine | BadLine]:
    """Every non-blank line of a JSONL file, in order, as :class:`JsonLine` or :class:`BadLine`.

    Streams (one line in memory at a time). Raises ``FileNotFoundError`` /
    ``IsADirectoryError`` / ``PermissionError`` for a file that cannot be read
    at all: that is the caller's argument, not a line.
    """
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            parsed = parse_line(raw, lineno)
            if parsed is not None:
                yield parsed


def iter_objects(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a result file, leaving out bad lines (a missing file has none).

    For resuming: a line cut by an interruption is a run that did not finish,
    so it simply runs again.
    """
    if not Path(path).exists():
        return
    for item in read_lines(path):
        if isinstance(item, JsonLine):
            yield item.data


def ends_cut(path: Path) -> bool:
    """True when the file's last line has no newline: a write cut by an interruption."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


class LineSink:
    """An append-only text file written without a buffer; errors name the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)

    def write(self, text: str) -> int:
        """Append ``text`` (UTF-8); ``OSError`` with the file's name when it cannot be."""
        data = memoryview(text.encode("utf-8"))
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        return len(text)

    def flush(self) -> None:
        """Nothing to do: every write went to the file (kept for file-like callers)."""

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> LineSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_append(path: Path) -> LineSink:
    """Open ``path`` for appending lines, first ending a cut last line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = ends_cut(path)
    sink = LineSink(path)
    if cut:
        try:
            sink.write("\n")
        except BaseException:
            sink.close()
            raise
    return sink


def dumps_line(record: Mapping[str, Any]) -> str:
    """One JSONL line (without its newline), UTF-8 text kept as is."""
    return json.dumps(record, ensure_ascii=False)


def write_lines(sink: IO[str], records: Iterable[Mapping[str, Any]]) -> int:
    """Write records as JSONL lines to an open text file; return how many."""
    count = 0
    for record in records:
        sink.write(dumps_line(record) + "\n")
        count += 1
    return count
