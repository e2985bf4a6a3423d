"""Which directories may be a workspace, and what the sandbox's own root holds.

Real directories, and a stand-in interpreter that answers the paths question
as a venv with an editable install would, so the expectations follow from the
paths alone.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pacore_graph.tools.sandbox import SandboxExecutionError, SandboxUnavailableError
from pacore_graph.tools.sandbox.paths import (
    SYSTEM_PATH,
    check_workdir,
    interpreter_paths,
    root_plan,
)


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


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can search, up to ``/`` (pytest's own tmp is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="pacore-paths-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _fake_python(where: Path, info: dict[str, object]) -> str:
    """An "interpreter" that answers the paths question with ``info`` (what a venv would say)."""
    script = where / "python"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(info)}\nEOF\n")
    script.chmod(0o755)
    return str(script)


def test_the_project_tree_of_an_editable_install_is_left_out(open_dir: Path) -> None:
    """Issue 31: sys.path entries outside the prefixes and site-packages are not mounted."""
    base = open_dir / "base"
    venv = open_dir / "venv"
    project = open_dir / "project"
    overlay = open_dir / "other" / "lib" / "site-packages"
    for d in (base / "lib" / "python3.11", venv / "bin", venv / "lib", project, overlay):
        d.mkdir(parents=True)
    python = _fake_python(
        venv / "bin",
        {
            "exe": str(venv / "bin" / "python"),
            "prefixes": [str(venv), str(base), str(venv), str(base)],
            "path": ["", str(base / "lib" / "python3.11"), str(project), str(overlay)],
        },
    )
    paths = interpreter_paths(python)
    assert str(project) not in paths
    assert {str(venv), str(base), str(overlay), str(venv / "bin")} <= set(paths)
    plan = root_plan(paths)
    bound = [target for target, _ in plan["binds"]]
    assert str(venv) in bound and str(venv / "bin") not in bound  # inside the venv's bind
    assert not any(b == str(project) or b.startswith(str(project) + "/") for b in bound)


def test_the_root_holds_the_system_directories_as_the_host_has_them() -> None:
    plan = root_plan([])
    bound = dict(plan["binds"])
    links = dict(plan["symlinks"])
    assert bound["/usr"] == "/usr"
    for entry in ("/bin", "/lib"):
        if os.path.islink(entry):
            assert links[entry] == os.readlink(entry)
        else:
            assert bound[entry] == entry
    assert "/etc" not in bound and "/etc/passwd" not in bound
    assert root_plan(["/usr/lib/python3", "/usr/bin"]) == plan  # inside /usr: nothing more


@pytest.mark.parametrize("what", ["/", "/etc", "/var", "home", "holds home"])
def test_an_interpreter_that_would_expose_too_much_is_refused(
    what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "users" / "ada"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    path = {"home": str(home), "holds home": str(home.parent)}.get(what, what)
    with pytest.raises(SandboxUnavailableError, match="will not show whole"):
        root_plan([path])


def test_the_interpreter_says_where_it_reads_from() -> None:
    paths = interpreter_paths(sys.executable)
    assert os.path.dirname(os.path.realpath(sys.executable)) in paths
    assert os.path.realpath(sys.prefix) in paths
    assert all(os.path.isabs(p) and os.path.isdir(p) for p in paths)
    assert len(set(paths)) == len(paths)
    assert "/usr/bin" in SYSTEM_PATH.split(":")
