"""The SWE example's scripted bug-fixer and repository (SWE graph and command tests)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "swe_fix_bug"
ISSUE = (EXAMPLE / "ISSUE.md").read_text()

#: The example repository's test command as these tests give it. The sandbox runs
#: it with this venv's pytest, which would import every installed pytest plugin
#: first: Arize Phoenix's client plugin (the ``phoenix`` extra) and langsmith's
#: cost ~20 CPU-seconds per start, ~3 s for the example's 5 tests without them.
#: A test run in the SWE tests starts up to 7 times, and under load one such
#: start passed the sandbox's 120 s wall limit (a "timed out" attempt failed
#: ``test_scripted_fixer_resolves_the_issue``). The example's tests need none of
#: the plugins; the command is still a shell command running pytest in the sandbox.
TEST_COMMAND = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest -q"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("swe_example", EXAMPLE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EX = _example()


def example_repo(tmp_path: Path) -> Path:
    """A fresh copy of the example's buggy repository."""
    return Path(shutil.copytree(EXAMPLE / "repo", tmp_path / "repo"))
