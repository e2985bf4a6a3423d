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


@pytest.mark.parametrize("umask", [0o027, 0o000])
def test_the_file_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """Issue 31: reports and results hold the problems; they are the user's alone."""
    old_mask = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "new" / "a.txt", "x")
        write_lines_atomic(tmp_path / "b.txt", ["x"])
    finally:
        os.umask(old_mask)
    modes = {
        name: stat.S_IMODE((tmp_path / name).stat().st_mode) for name in ("new/a.txt", "b.txt")
    }
    assert modes == {"new/a.txt": 0o600, "b.txt": 0o600}
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
