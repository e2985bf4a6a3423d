"""The one JSONL reader (a bad line is a BadLine, never an abort or a silent drop) and the sink.

Each kind of bad line is written into a real file between good ones, and
the reader must give the good lines back and each bad one with its line
number; the appending side is checked on a file cut mid-line, as an
interrupted run leaves it.
"""

from __future__ import annotations

import errno
import io
import json
import tracemalloc
from pathlib import Path

import pytest

from pacore_graph.runs.jsonl import (
    MAX_LINE_BYTES,
    MAX_LINE_OBJECTS,
    BadLine,
    JsonLine,
    LineSink,
    dumps_line,
    ends_cut,
    iter_objects,
    open_append,
    parse_line,
    read_lines,
    unicode_problem,
    write_lines,
)

GOOD = {"id": "a", "text": "café"}

#: Raw lines that cannot be used, and a word their reason must carry.
BAD: dict[str, tuple[bytes, str]] = {
    "not utf-8": (b'{"id": "\xff"}', "not UTF-8 text (byte 0xff"),
    "not json": (b'{"id": ', "not valid JSON"),
    "cut line": (b'{"id": "b", "te', "not valid JSON"),
    "array": (b"[1, 2]", "expected a JSON object, got list"),
    "number": (b"42", "expected a JSON object, got int"),
    "string": (b'"text"', "expected a JSON object, got str"),
    "lone surrogate": (b'{"t": "\\ud800"}', "lone surrogate"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_line_comes_out_as_a_badline_between_the_good_ones(kind: str, tmp_path: Path) -> None:
    raw, reason = BAD[kind]
    good = json.dumps(GOOD).encode()
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join([good, raw, b"", good]) + b"\n")
    items = list(read_lines(path))
    assert [type(i) for i in items] == [JsonLine, BadLine, JsonLine]
    first, bad, last = items
    assert isinstance(first, JsonLine) and isinstance(last, JsonLine)
    assert first.data == last.data == GOOD
    assert (first.line, last.line) == (1, 4)  # the blank line 3 is skipped, still counted
    assert isinstance(bad, BadLine) and bad.line == 2
    assert reason in bad.reason and bad.message == bad.reason
    assert str(bad) == f"line 2: {bad.reason}" and "\n" not in str(bad)


def test_blank_lines_are_not_data() -> None:
    assert parse_line(b"   \n", 1) is None and parse_line(b"", 1) is None


def test_unicode_problem_finds_lone_surrogates_anywhere() -> None:
    assert unicode_problem({"a": ["fine", {"b": "é"}]}) is None
    assert "lone surrogate" in (unicode_problem({"a": ["x", {"b": "\ud800"}]}) or "")


def test_a_file_that_cannot_be_read_is_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(read_lines(tmp_path / "absent.jsonl"))
    with pytest.raises(IsADirectoryError):
        list(read_lines(tmp_path))


def test_iter_objects_keeps_the_good_lines_and_a_missing_file_has_none(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + BAD["cut line"][0])
    assert list(iter_objects(path)) == [GOOD]
    assert list(iter_objects(tmp_path / "absent.jsonl")) == []


def test_ends_cut_tells_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    assert not ends_cut(path)  # missing
    path.write_bytes(b"")
    assert not ends_cut(path)  # empty
    path.write_bytes(b'{"a": 1}\n')
    assert not ends_cut(path)
    path.write_bytes(b'{"a": 1}\n{"b"')
    assert ends_cut(path)


def test_appending_to_a_cut_file_ends_the_cut_line_first(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.jsonl"
    path.parent.mkdir()
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + BAD["cut line"][0])
    with open_append(path) as sink:
        sink.write(dumps_line({"id": "c"}) + "\n")
    items = list(read_lines(path))
    assert [type(i) for i in items] == [JsonLine, BadLine, JsonLine]  # not glued together
    assert isinstance(items[-1], JsonLine) and items[-1].data == {"id": "c"}


def test_open_append_makes_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "out.jsonl"
    with open_append(path) as sink:
        assert sink.write("x\n") == 2
        sink.flush()
    assert path.read_text() == "x\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_fails_the_write_at_once_naming_the_file() -> None:
    """/dev/full answers every write with ENOSPC, as a full disk does."""
    full = Path("/dev/full")
    with LineSink(full) as sink, pytest.raises(OSError) as caught:
        sink.write(dumps_line(GOOD) + "\n")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(full)


def test_closing_twice_is_fine(tmp_path: Path) -> None:
    sink = open_append(tmp_path / "out.jsonl")
    sink.close()
    sink.close()


def test_dumps_line_keeps_text_and_write_lines_counts() -> None:
    assert dumps_line(GOOD) == '{"id": "a", "text": "café"}'
    out = io.StringIO()
    records = [GOOD, {"id": "b"}]
    assert write_lines(out, records) == len(records)
    assert [json.loads(x) for x in out.getvalue().splitlines()] == records


# --------------------------------------------------------------------------- issue 31: caps


def test_the_caps_are_generous_for_real_benchmarks() -> None:
    assert MAX_LINE_BYTES == 256 * 1024 * 1024 and MAX_LINE_OBJECTS == 1_000_000


def test_a_line_over_the_byte_cap_is_a_bad_line_never_held_whole(tmp_path: Path) -> None:
    """Issue 31 (low): a 1 GB line was read whole (5.4 GB at its peak)."""
    path = tmp_path / "big.jsonl"
    with path.open("w") as fh:
        fh.write(json.dumps(GOOD) + "\n")
        fh.write('{"blob": "' + "x" * (16 << 20) + '"}\n')  # 16 MiB
        fh.write(json.dumps({"id": "c"}) + "\n")
    tracemalloc.start()
    try:
        items = list(read_lines(path, max_line_bytes=1 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [type(i).__name__ for i in items] == ["JsonLine", "BadLine", "JsonLine"]
    assert str(items[1]) == (
        "line 2: longer than 1048576 bytes (the cap on one JSONL line): not read"
    )
    assert isinstance(items[2], JsonLine) and items[2].line == 3
    assert peak < 4 * (1 << 20), f"peak {peak / 2**20:.1f} MiB"  # the cap and a piece
    # At the cap exactly, the line is read (its newline does not count).
    exact = tmp_path / "exact.jsonl"
    exact.write_text('{"b": "' + "y" * 100 + '"}\n')
    assert isinstance(next(read_lines(exact, max_line_bytes=109)), JsonLine)
    assert isinstance(next(read_lines(exact, max_line_bytes=108)), BadLine)


def test_a_big_line_of_too_many_objects_is_refused_while_parsed(tmp_path: Path) -> None:
    """4M tiny objects in one line cost 1.7 GB parsed; the parse stops at the cap."""
    path = tmp_path / "many.jsonl"
    row = {"tests": [{"input": "1", "output": "1"}] * 60_000}  # 1.9 MB, 60,001 objects
    path.write_text(json.dumps(row) + "\n" + json.dumps(GOOD) + "\n")
    items = list(read_lines(path, max_line_objects=10_000))
    assert isinstance(items[0], BadLine) and items[0].line == 1
    assert "more than 10000 JSON objects" in items[0].reason
    assert isinstance(items[1], JsonLine)
    assert isinstance(next(read_lines(path)), JsonLine)  # under the default cap
