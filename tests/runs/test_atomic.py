"""Files that appear complete or not at all (runs/atomic).

An interrupted write is simulated the way it happens: the lines being written
stop coming (an exception from the producer, or Ctrl-C) half way through.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pacore_graph.runs.atomic import write_lines_atomic, write_text_atomic


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_lines_are_written_with_newlines_and_counted(tmp_path: Path) -> None:
    lines = ['{"a": 1}', '{"b": 2}', ""]
    target = tmp_path / "deep" / "er" / "out.jsonl"  # parents are created
    assert write_lines_atomic(target, lines) == len(lines)
    assert target.read_text(encoding="utf-8") == "".join(line + "\n" for line in lines)
    assert write_lines_atomic(target, iter(())) == 0
    assert target.read_text(encoding="utf-8") == ""
    assert leftovers(target.parent) == []


def test_text_is_written_as_given(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    write_text_atomic(target, "no newline at the end — ünïcode")
    assert target.read_text(encoding="utf-8") == "no newline at the end — ünïcode"


@pytest.mark.parametrize("interruption", [RuntimeError("producer broke"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, interruption: BaseException
) -> None:
    target = tmp_path / "results.jsonl"
    write_lines_atomic(target, ["old 1", "old 2"])
    before = target.read_bytes()

    def half_then_stop() -> Iterator[str]:
        yield "new 1"
        raise interruption

    with pytest.raises(type(interruption)):
        write_lines_atomic(target, half_then_stop())
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_the_file_gets_the_permissions_open_would_give(tmp_path: Path) -> None:
    old_mask = os.umask(0o027)
    try:
        write_text_atomic(tmp_path / "a.txt", "x")
        write_lines_atomic(tmp_path / "b.txt", ["x"])
        with open(tmp_path / "c.txt", "w") as plain:  # what open() gives, for comparison
            plain.write("x")
    finally:
        os.umask(old_mask)
    modes = {
        name: stat.S_IMODE((tmp_path / f"{name}.txt").stat().st_mode) for name in ("a", "b", "c")
    }
    assert modes["a"] == modes["b"] == modes["c"] == 0o640  # not mkstemp's 0600
