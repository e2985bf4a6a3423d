"""The SWE example's scripted bug-fixer and repository (SWE graph and command tests)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "swe_fix_bug"
ISSUE = (EXAMPLE / "ISSUE.md").read_text()


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
