"""Which directories may be a workspace, and what the sandbox must cover to reach its files.

Real directories under ``tmp_path`` with real modes; the user the code runs
as is given, so the expectations follow from the modes alone.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pacore_graph.tools.sandbox import SandboxExecutionError
from pacore_graph.tools.sandbox.paths import (
    SYSTEM_PATH,
    check_workdir,
    covers,
    interpreter_paths,
    searchable,
)

NOBODY = 65534


@pytest.mark.parametrize("system", ["/", "/etc", "/usr", "/home", "/root"])
def test_system_directories_are_refused(system: str) -> None:
    with pytest.raises(SandboxExecutionError, match=f"workspace {system} refused: a system"):
        check_workdir(Path(system))


def test_a_home_and_what_holds_it_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "users" / "ada"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    for refused in (home, home.parent):
        with pytest.raises(SandboxExecutionError, match=f"it is or holds {home}"):
            check_workdir(refused)
    check_workdir(home.parent.parent / "elsewhere")  # beside it is fine
    (home / "project").mkdir()
    check_workdir(home / "project")  # inside a home is a project, not the home


def stat_with(mode: int, uid: int, gid: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("mode", "owner", "group", "searchable_by_nobody"),
    [
        (0o700, 0, 0, False),
        (0o701, 0, 0, True),  # others may search
        (0o710, 0, NOBODY, True),  # the group may search
        (0o100, NOBODY, 0, True),  # the owner may search
        (0o070, NOBODY, NOBODY, False),  # the owner's bits decide for the owner
    ],
)
def test_searchable_reads_the_bits_that_apply_to_the_user(
    mode: int, owner: int, group: int, searchable_by_nobody: bool
) -> None:
    st = stat_with(mode, owner, group)
    assert searchable(st, NOBODY, NOBODY) is searchable_by_nobody
    assert searchable(st, 0, 0)  # root searches everything


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can search, up to ``/`` (pytest's own tmp is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="pacore-paths-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_covers_the_topmost_closed_directory_and_binds_back_only_what_is_needed(
    open_dir: Path,
) -> None:
    tmp_path = open_dir
    if os.geteuid() == NOBODY:
        pytest.skip("runs as nobody")
    closed = tmp_path / "closed"
    venv = closed / "venv" / "lib"
    work = closed / "work"
    inner = closed / "venv" / "lib" / "site"
    for d in (venv, work, inner):
        d.mkdir(parents=True, exist_ok=True)
    closed.chmod(0o700)  # nobody cannot pass it
    try:
        got = covers([str(venv), str(work), str(inner)], NOBODY, NOBODY)
    finally:
        closed.chmod(0o755)
    real = os.path.realpath
    assert got == [(real(closed), sorted([real(venv), real(work)]))]  # inner is under venv


def test_open_paths_need_no_cover(open_dir: Path) -> None:
    (open_dir / "open").mkdir()
    (open_dir / "open").chmod(0o755)
    assert covers([str(open_dir / "open")], NOBODY, NOBODY) == []


def test_the_interpreter_says_where_it_reads_from() -> None:
    paths = interpreter_paths(sys.executable)
    assert os.path.dirname(os.path.realpath(sys.executable)) in paths
    assert os.path.realpath(sys.prefix) in paths
    assert all(os.path.isabs(p) and os.path.isdir(p) for p in paths)
    assert len(set(paths)) == len(paths)
    assert "/usr/bin" in SYSTEM_PATH.split(":")
