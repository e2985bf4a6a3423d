"""``pacore_graph``'s public API is what users use (issue 33, part 3).

The rules, each a test below:

- **Every public name resolves**, lazily, to the object of the module
  ``_LOCATIONS`` names, and the type checkers' imports (``TYPE_CHECKING``)
  name the same modules, so mypy and the running package agree.
- **Every public name is used**: the docs' python blocks (README.md and
  ``docs/*.md``) or ``examples/`` import it from ``pacore_graph`` itself. A
  name nobody imports from the top level is not part of what users use.
- **The docs and examples use the top level**: no python block of the docs
  and no example imports a name of ``__all__`` from a submodule
  (``from pacore_graph.llm.client import OpenAICompatClient`` must be
  ``from pacore_graph import OpenAICompatClient``). Names outside ``__all__``
  come from their own modules as before: the subpackages that are tools of
  their own (``pacore_graph.testing``'s scripted servers,
  ``pacore_graph.embedded``, ``pacore_graph.rl``, ``pacore_graph.eval``,
  ``pacore_graph.otel``, ``pacore_graph.integrations``) and a method's own
  helpers.
- **Nothing internal**: the request batcher, the limiter, the explorer's
  grouping and the other internals the issue names are not exported (they
  stay importable from their modules).
- **No clash with LangGraph**: no name of ``__all__``, and no name of any
  module's ``__all__`` in the package, is a public name of
  ``langgraph.types``, ``langgraph.graph``, ``langgraph.pregel`` or
  ``langgraph.checkpoint.base`` (a star import of both would silently lose
  one). The old ``RetryPolicy`` stays reachable with a ``DeprecationWarning``.
"""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

import pacore_graph

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(pacore_graph.__file__).parent
PUBLIC = sorted(set(pacore_graph.__all__) - {"__version__"})
LANGGRAPH_MODULES = (
    "langgraph.types",
    "langgraph.graph",
    "langgraph.pregel",
    "langgraph.checkpoint.base",
)
#: Internals the issue found exported: each stays importable from its module.
INTERNAL = {
    "SampleBatcher": "pacore_graph.llm.batching",
    "SequenceLimiter": "pacore_graph.control.limits",
    "ChatExplorer": "pacore_graph.graph.explorer",
    "ExploreGroup": "pacore_graph.graph.explorer",
    "render_synthesis": "pacore_graph.values.prompts",
    "round_sampling": "pacore_graph.graph.messages_explorer",
    "compactor_from_name": "pacore_graph.values.compaction",
}
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _parse(source: str) -> ast.Module:
    """Parsed only (a block of the docs may ``await`` at its top, as in a notebook)."""
    return ast.parse(source)


def user_sources() -> list[tuple[str, ast.Module]]:
    """(where, parsed code) for every example file and every python block of the docs."""
    found = [
        (str(path.relative_to(ROOT)), _parse(path.read_text(encoding="utf-8")))
        for path in sorted((ROOT / "examples").rglob("*.py"))
        if "repo" not in path.relative_to(ROOT / "examples").parts  # swe_fix_bug's buggy repo
    ]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for index, block in enumerate(PYTHON_BLOCK.findall(text)):
            found.append((f"{page.relative_to(ROOT)} python block {index}", _parse(block)))
    return found


SOURCES = user_sources()


def _imports_from(tree: ast.Module) -> list[ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]


def test_the_sources_scanned_are_the_docs_and_examples() -> None:
    """A wrong path would scan nothing and every check below would pass vacuously."""
    where = {w.split(" ")[0] for w, _ in SOURCES}
    assert "examples/custom_explorer.py" in where and "docs/python.md" in where
    assert "README.md" in where and len(SOURCES) > 20


def test_the_locations_are_the_public_names_and_what_type_checkers_see() -> None:
    locations = pacore_graph._LOCATIONS
    assert set(locations) == set(PUBLIC)
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    checked: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                for alias in stmt.names:
                    checked[alias.name] = stmt.module.removeprefix("pacore_graph.")
    assert checked == dict(locations)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves_to_its_modules_object(name: str) -> None:
    module = importlib.import_module(f"pacore_graph.{pacore_graph._LOCATIONS[name]}")
    assert getattr(pacore_graph, name) is getattr(module, name)


def test_every_public_name_is_imported_from_the_top_level_by_the_docs_or_an_example() -> None:
    used: set[str] = set()
    for _, tree in SOURCES:
        for node in _imports_from(tree):
            if node.module == "pacore_graph":
                used.update(alias.name for alias in node.names)
    assert not set(PUBLIC) - used, (
        f"public but never imported by users: {sorted(set(PUBLIC) - used)}"
    )
    assert not used - set(pacore_graph.__all__), sorted(used - set(pacore_graph.__all__))


def test_the_docs_and_examples_import_public_names_from_the_top_level() -> None:
    public = set(PUBLIC)
    wrong = sorted(
        f"{where}: from {node.module} import {alias.name}"
        for where, tree in SOURCES
        for node in _imports_from(tree)
        if node.module and node.module.startswith("pacore_graph.")
        for alias in node.names
        if alias.name in public
    )
    assert not wrong, "import these from pacore_graph:\n" + "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(INTERNAL))
def test_internals_are_not_exported_and_stay_in_their_modules(name: str) -> None:
    assert name not in pacore_graph.__all__
    assert hasattr(importlib.import_module(INTERNAL[name]), name)


def langgraph_public_names() -> set[str]:
    names: set[str] = set()
    for module_name in LANGGRAPH_MODULES:
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        names.update(exported if exported is not None else dir(module))
    return {n for n in names if not n.startswith("_")}


def test_no_public_name_is_one_of_langgraphs() -> None:
    theirs = langgraph_public_names()
    assert {"RetryPolicy", "Durability", "StateGraph", "Send"} <= theirs  # the scan sees them
    assert not set(PUBLIC) & theirs, sorted(set(PUBLIC) & theirs)


def _module_all(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and "__all__"
            in ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)
            and node.value is not None
        ):
            value = ast.literal_eval(node.value)
            return list(value)
    return []


def test_no_modules_all_holds_a_langgraph_name() -> None:
    """``Durability`` was in ``runs.checkpoint.__all__``: now ``CheckpointDurability``."""
    theirs = langgraph_public_names()
    clashes = sorted(
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in PACKAGE.rglob("*.py")
        for name in _module_all(path)
        if name in theirs
    )
    assert not clashes, clashes
    checkpoint = importlib.import_module("pacore_graph.runs.checkpoint")
    assert "CheckpointDurability" in checkpoint.__all__
    assert checkpoint.Durability is checkpoint.CheckpointDurability  # old imports still work


def test_the_old_retry_policy_name_warns_and_is_the_new_class() -> None:
    from pacore_graph.settings import config

    assert "RetryPolicy" not in pacore_graph.__all__
    with pytest.warns(DeprecationWarning, match="pacore_graph.ModelRetryPolicy"):
        old = pacore_graph.RetryPolicy
    assert old is pacore_graph.ModelRetryPolicy is config.ModelRetryPolicy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config.RetryPolicy is config.ModelRetryPolicy  # its module: no warning
    assert pacore_graph.PaCoReConfig(retry=old(max_attempts=2)).retry.max_attempts == 2
