"""Graders as plugins: a package's ``pacore_graph.graders`` entry point is a --grader NAME.

The package is real: a module and a ``.dist-info`` folder with its
``entry_points.txt`` on ``sys.path``, found by ``importlib.metadata`` as an
installed distribution would be.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pacore_graph.eval.graders import grader_from_name, registered_graders


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "shouty_grader.py").write_text(
        textwrap.dedent(
            """
            from pacore_graph.eval.grade import Grade

            class ShoutyGrader:
                name = "shouty"

                def grade(self, response, ground_truth, problem=None):
                    ok = response.isupper()
                    return Grade(1.0 if ok else 0.0, True, response, "UPPER CASE")

            def loud(response, ground_truth):
                return response.endswith("!")

            def broken_factory():
                return 42
            """
        )
    )
    info = tmp_path / "shouty_grader-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shouty-grader\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[pacore_graph.graders]\n"
        "shouty = shouty_grader:ShoutyGrader\n"
        "loud = shouty_grader:loud\n"
        "broken = shouty_grader:broken_factory\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_registered_grader_class_is_a_name(plugin: Path) -> None:
    assert {"shouty", "loud", "broken"} <= set(registered_graders())
    grader = grader_from_name("shouty")
    assert grader.name == "shouty"
    assert grader.grade("YES", None).score == 1.0
    assert grader.grade("yes", None).score == 0.0


def test_a_registered_function_is_wrapped(plugin: Path) -> None:
    grader = grader_from_name("loud")
    assert grader.grade("done!", None).score == 1.0
    assert grader.grade("done", None).score == 0.0


def test_a_factory_that_makes_no_grader_is_refused(plugin: Path) -> None:
    with pytest.raises(TypeError, match="made a int, not a grader"):
        grader_from_name("broken")


def test_unknown_names_list_the_registered_ones(plugin: Path) -> None:
    with pytest.raises(ValueError, match="shouty"):
        grader_from_name("nope")
