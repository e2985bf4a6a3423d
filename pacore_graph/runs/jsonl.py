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

**Caps.** One line is at most :data:`MAX_LINE_BYTES` (256 MiB): a longer one
is a :class:`BadLine` read past in pieces, never held whole (a 1 GB line
used to peak at 5.4 GB; a line at the cap costs about twice its size to read
and decode). The cap is generous for real benchmarks:
LiveCodeBench's rows, the largest we read, carry their private tests
compressed and run to a few MB on average (its release_v6 is a few GB over
1,055 problems). JSON text can grow many times over once parsed (a line of
empty objects grows about 20x), so a line over 1 MiB is also parsed with a
count of its objects and refused past :data:`MAX_LINE_OBJECTS` (one million:
4 million small test objects in one line peaked at 1.7 GB); arrays are not
counted, so a crafted line of empty arrays can still take about 20 times its
size, bounded by the byte cap.

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

from pacore_graph.errors import PaCoReError
from pacore_graph.runs.private_files import FILE_MODE, private_dir

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_LINE_OBJECTS",
    "BadLine",
    "JsonLine",
    "LineSink",
    "TooManyObjects",
    "dumps_line",
    "ends_cut",
    "iter_objects",
    "iter_raw_lines",
    "loads_bounded",
    "open_append",
    "parse_line",
    "read_lines",
    "unicode_problem",
    "write_lines",
]


MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest line :func:`read_lines` reads, in bytes without its newline (256 MiB)."""

MAX_LINE_OBJECTS = 1_000_000
"""The most JSON objects one line over :data:`_COUNT_FROM` bytes may hold."""

_COUNT_FROM = 1 << 20  # smaller lines cannot hold enough objects to matter
_SKIP_CHUNK = 1 << 20


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


class TooManyObjects(PaCoReError):
    """JSON text with more objects than its reader allows (:func:`loads_bounded`).

    Not a ``ValueError``: a reader that treats invalid JSON as a ``ValueError``
    must not mistake a capped line for a malformed one (each names its own cause).
    """


def loads_bounded(text: str | bytes, max_objects: int) -> Any:
    """``json.loads``, stopped with :class:`TooManyObjects` at the ``max_objects + 1``-th object.

    The count is taken as the parser builds each object, so memory stays
    bounded by what was built before the stop, not by what the text holds.
    """
    count = 0

    def counted(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal count
        count += 1
        if count > max_objects:
            raise TooManyObjects(f"holds more than {max_objects} JSON objects")
        return dict(pairs)

    return json.loads(text, object_pairs_hook=counted)


def parse_line(
    raw: bytes, lineno: int, *, max_objects: int = MAX_LINE_OBJECTS
) -> JsonLine | BadLine | None:
    """One raw line as an object or a :class:`BadLine`; None for a blank line.

    A line over 1 MiB holding more than ``max_objects`` JSON objects is a
    :class:`BadLine` (see the module docstring).
    """
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
        data = loads_bounded(text, max_objects) if len(raw) > _COUNT_FROM else json.loads(text)
    except TooManyObjects as exc:
        return BadLine(line=lineno, reason=f"{exc} (the cap on one JSONL line): not read")
    except ValueError as exc:
        return BadLine(line=lineno, reason=f"not valid JSON ({exc})")
    if not isinstance(data, dict):
        return BadLine(line=lineno, reason=f"expected a JSON object, got {type(data).__name__}")
    problem = unicode_problem(data)
    if problem is not None:
        return BadLine(line=lineno, reason=f"not valid text: {problem}")
    return JsonLine(line=lineno, data=data)


def iter_raw_lines(
    fh: IO[bytes], max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, raw line)`` of an open binary file; ``None`` for a line over the cap.

    A line longer than ``max_line_bytes`` (its newline aside) is read past in
    1 MiB pieces and never held whole.
    """
    lineno = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            del raw
            while True:
                piece = fh.readline(_SKIP_CHUNK)
                if not piece or piece.endswith(b"\n"):
                    break
            yield lineno, None
            continue
        yield lineno, raw


def read_lines(
    path: str | Path,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_line_objects: int = MAX_LINE_OBJECTS,
) -> Iterator[JsonLine | BadLine]:
    """Every non-blank line of a JSONL file, in order, as :class:`JsonLine` or :class:`BadLine`.

    Streams (one line in memory at a time; a line over ``max_line_bytes``, or
    over 1 MiB with more than ``max_line_objects`` objects, is a
    :class:`BadLine`). Raises ``FileNotFoundError`` / ``IsADirectoryError`` /
    ``PermissionError`` for a file that cannot be read at all: that is the
    caller's argument, not a line.
    """
    with open(path, "rb") as fh:
        for lineno, raw in iter_raw_lines(fh, max_line_bytes):
            if raw is None:
                yield BadLine(
                    line=lineno,
                    reason=f"longer than {max_line_bytes} bytes (the cap on one JSONL line): "
                    "not read",
                )
                continue
            parsed = parse_line(raw, lineno, max_objects=max_line_objects)
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
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self._fd = os.open(path, flags, FILE_MODE)  # a new file is private (issue 31)

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
    """Open ``path`` for appending lines, first ending a cut last line (new folders ``0700``)."""
    private_dir(path.parent)
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
