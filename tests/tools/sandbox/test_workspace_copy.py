"""The workspace copy in and back, called directly (the launcher runs it as root in the sandbox)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pacore_graph.tools.sandbox.workspace_copy import (
    MAX_DEPTH,
    WorkspaceTooDeep,
    copy_in,
    copy_out,
)

AS_ROOT = os.geteuid() == 0
NOBODY = 65534


@contextmanager
def dir_fd(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


@pytest.mark.skipif(not AS_ROOT, reason="ownership and modes decide as root")
def test_what_the_sandbox_user_cannot_read_is_hidden_both_ways(tmp_path: Path) -> None:
    host, box = tmp_path / "host", tmp_path / "box"
    (host / "private_dir").mkdir(parents=True)
    box.mkdir()
    (host / "private_dir" / "inside.txt").write_text("p")
    (host / "private_dir").chmod(0o700)
    (host / "secret").write_text("s")
    (host / "secret").chmod(0o600)
    (host / "public").write_text("open")
    os.mkfifo(host / "fifo")
    with dir_fd(host) as h, dir_fd(box) as b:
        hidden = copy_in(h, b, uid=NOBODY, gid=NOBODY, owner=(NOBODY, NOBODY))
        assert hidden == {"private_dir", "secret", "fifo"}
        assert sorted(p.name for p in box.iterdir()) == ["public"]
        assert (box / "public").stat().st_uid == NOBODY
        # The code deletes everything it saw and makes entries named like hidden ones.
        (box / "public").unlink()
        (box / "secret").write_text("replaced")
        (box / "private_dir").mkdir()
        copy_out(b, h, hidden)
    assert (host / "secret").read_text() == "s" and (host / "secret").stat().st_uid == 0
    assert (host / "private_dir" / "inside.txt").read_text() == "p"
    assert stat.S_ISFIFO((host / "fifo").lstat().st_mode)
    assert not (host / "public").exists()


def test_unchanged_files_are_not_rewritten_and_changed_ones_are_replaced(tmp_path: Path) -> None:
    host, box = tmp_path / "host", tmp_path / "box"
    host.mkdir()
    box.mkdir()
    (host / "same.txt").write_text("same")
    (host / "edit.txt").write_text("old")
    with dir_fd(host) as h, dir_fd(box) as b:
        copy_in(h, b, uid=None, gid=None, owner=None)
        (box / "edit.txt").write_text("new")
        os.link(host / "edit.txt", tmp_path / "outside.txt")
        same = (host / "same.txt").stat()
        copy_out(b, h, set())
    after = (host / "same.txt").stat()
    assert (after.st_ino, after.st_ctime_ns) == (same.st_ino, same.st_ctime_ns)  # untouched
    assert (host / "edit.txt").read_text() == "new"
    assert (tmp_path / "outside.txt").read_text() == "old"  # replaced, not written in place


def test_too_deep_on_the_way_in_is_an_error(tmp_path: Path) -> None:
    host, box = tmp_path / "host", tmp_path / "box"
    box.mkdir()
    deep = host
    for _ in range(MAX_DEPTH + 2):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with dir_fd(host) as h, dir_fd(box) as b, pytest.raises(WorkspaceTooDeep):
        copy_in(h, b, uid=None, gid=None, owner=None)
