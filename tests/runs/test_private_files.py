"""Private files: folders made ``0700`` and the umask held at ``077``, whatever the caller's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pacore_graph.runs.private_files import DIR_MODE, FILE_MODE, private_dir, private_umask


@pytest.fixture
def open_umask() -> object:
    before = os.umask(0)
    yield
    os.umask(before)


def test_private_dir_makes_every_missing_folder_0700(tmp_path: Path, open_umask: object) -> None:
    (tmp_path / "a").mkdir(mode=0o755)
    (tmp_path / "a").chmod(0o755)
    made = private_dir(tmp_path / "a" / "b" / "c")
    assert made == tmp_path / "a" / "b" / "c" and made.is_dir()
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o755  # existing: left as it was
    for folder in (tmp_path / "a" / "b", made):
        assert folder.stat().st_mode & 0o777 == DIR_MODE
    assert private_dir(made) == made  # again: nothing to do


def test_private_dir_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError):
        private_dir(tmp_path / "f")


def test_private_umask_makes_new_files_private_and_gives_the_umask_back(
    tmp_path: Path, open_umask: object
) -> None:
    with private_umask():
        (tmp_path / "inside").write_text("x")
        os.mkdir(tmp_path / "folder")
    (tmp_path / "after").write_text("x")
    assert (tmp_path / "inside").stat().st_mode & 0o777 == FILE_MODE
    assert (tmp_path / "folder").stat().st_mode & 0o777 == DIR_MODE
    assert (tmp_path / "after").stat().st_mode & 0o777 == 0o666
