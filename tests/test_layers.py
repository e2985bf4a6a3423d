"""The core does not depend on evaluation: no module of it imports ``pacore_graph.eval``.

The loop this guards against was records -> message graph -> graders ->
compaction -> records: a result object reaching up into evaluation, so that
running a graph imported the graders. Two checks, because each misses what
the other sees: the source scan finds imports inside functions (which run
only on some paths), the blocked import finds what actually loads.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pacore_graph

PACKAGE = Path(pacore_graph.__file__).parent

#: Layers above the core, which may import it and each other; everything
#: else under ``pacore_graph/`` is core.
ABOVE_CORE = ("eval", "rl", "message_graph", "cli", "serve", "__main__")
FORBIDDEN = tuple(f"pacore_graph.{name}" for name in ABOVE_CORE)


def is_above_core(name: str) -> bool:
    """``pacore_graph.cli`` and ``pacore_graph.eval.x`` are; ``pacore_graph.llm.client`` is not."""
    return any(name == top or name.startswith(top + ".") for top in FORBIDDEN)


def core_modules() -> list[Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        first = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if first not in ABOVE_CORE:
            found.append(path)
    return found


def module_name(path: Path) -> str:
    parts = ("pacore_graph", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every module an ``import`` statement anywhere in the file names (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_the_core_is_a_real_set_of_modules() -> None:
    names = {module_name(p) for p in core_modules()}
    assert {
        "pacore_graph.graph.records",
        "pacore_graph.graph.builder",
        "pacore_graph.graph.compaction",
    } <= names
    assert not any(is_above_core(n) for n in names)


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: module_name(p))
def test_no_core_module_imports_a_layer_above_it(path: Path) -> None:
    upward = sorted(name for name in imported_names(path) if is_above_core(name))
    assert not upward, f"{module_name(path)} imports {upward}"


def test_the_core_imports_with_evaluation_blocked() -> None:
    """Import every core module in a fresh interpreter where ``pacore_graph.eval`` cannot load."""
    modules = [module_name(p) for p in core_modules()]
    script = f"""
import importlib, importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == top or name.startswith(top + ".") for top in {FORBIDDEN!r}):
            raise ImportError(f"blocked layer above the core: {{name}}")
        return None

sys.meta_path.insert(0, Block())
for name in {modules!r}:
    importlib.import_module(name)
loaded = sorted(
    m for m in sys.modules if any(m == t or m.startswith(t + ".") for t in {FORBIDDEN!r})
)
assert not loaded, loaded
print("ok", len({modules!r}))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")
