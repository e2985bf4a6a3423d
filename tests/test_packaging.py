"""The wheel ships every subpackage.

``pyproject.toml`` lists packages explicitly (``graphs/`` and ``tools/`` are
mapped into ``pacore_graph``), so a new subpackage that is not listed works in
an editable checkout and is missing from a real install. This test walks the
source folders and compares.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _subpackages(folder: Path, dotted: str) -> set[str]:
    found = set()
    for init in folder.rglob("__init__.py"):
        rel = init.parent.relative_to(folder)
        if "__pycache__" in rel.parts:
            continue
        found.add(".".join((dotted, *rel.parts)) if rel.parts else dotted)
    return found


def test_every_subpackage_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setup = config["tool"]["setuptools"]
    listed = set(setup["packages"])
    on_disk = set()
    for dotted, folder in setup["package-dir"].items():
        on_disk |= _subpackages(ROOT / folder, dotted)
    missing = sorted(on_disk - listed)
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"
    stale = sorted(listed - on_disk)
    assert not stale, f"listed in pyproject.toml but not on disk: {stale}"
