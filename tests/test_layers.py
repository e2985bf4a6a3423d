"""The package's folders are layers: no module imports a layer above its own, and no circles.

The loop this first guarded against was records -> message graph -> graders
-> compaction -> records: a result object reaching up into evaluation, so
that running a graph imported the graders. Since the modules moved into
folders by layer (issue 19, part 2) the table below states the whole order,
lowest first; since the values got a folder of their own (issue 33, part 2)
each layer is whole folders, and the scan covers the repo's ``graphs/`` and
``tools/`` (installed as ``pacore_graph.graphs`` and ``pacore_graph.tools``)
as well as ``pacore_graph/``. Three checks hold the order, because each
misses what the others see: the source scan finds imports inside functions
(which run only on some paths), the blocked import finds what actually loads,
and the import graph finds circles between modules of the same layer.
docs/layout.md is held to the same table: its entries come in the table's
order and name every module.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import pacore_graph

PACKAGE = Path(pacore_graph.__file__).parent


def _located(name: str) -> Path:
    """Where an installed subpackage's files are (``pacore_graph.tools`` is the repo's tools/)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, name
    return Path(next(iter(spec.submodule_search_locations)))


#: The scanned trees: each folder and the package name it is installed as.
ROOTS: dict[str, Path] = {
    "pacore_graph": PACKAGE,
    "pacore_graph.graphs": _located("pacore_graph.graphs"),
    "pacore_graph.tools": _located("pacore_graph.tools"),
}

#: The layers, lowest first: a module may import its own layer and those
#: listed before it. Each layer is a set of module prefixes, each a whole
#: folder (or a top-level module); the longest prefix naming a module decides
#: its layer. ``tools/`` sits just above the values because its modules import
#: nothing else of the package (the sandbox, workspaces and trajectory tools
#: work on values and the standard library), while ``graphs/`` and ``eval/``
#: use them; ``graphs/`` sits just above ``graph/`` because its graphs are
#: ``build_pacore_graph`` over the graph's parts and need no run control, so
#: the core that runs without evaluation includes them.
LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "base",
        ("pacore_graph", "pacore_graph.errors", "pacore_graph.lazy"),
        "the error tree and lazy names: importable by everything (``pacore_graph`` itself only"
        " for ``__version__``; its public names load lazily)",
    ),
    (
        "values",
        ("pacore_graph.values",),
        "the run's records and the pure functions over them (answers and their grouping,"
        " compaction, prompts, seeds), OpenTelemetry's attribute names and the trace kinds:"
        " every layer speaks in these",
    ),
    (
        "tools",
        ("pacore_graph.tools",),
        "agent tools (repo folder tools/): the sandbox, code executor, workspaces, trajectory"
        " tools; values in, values out",
    ),
    (
        "control",
        ("pacore_graph.control",),
        "quorum, consensus, budgets, limits: decisions over values, no settings or I/O",
    ),
    (
        "settings",
        ("pacore_graph.settings",),
        "the run config and its views; a config names a quorum and a tracing exporter",
    ),
    (
        "llm",
        ("pacore_graph.llm", "pacore_graph.embedded", "pacore_graph.testing"),
        "model calls (the clients, the embedded model server, the scripted test servers):"
        " they take settings and return records",
    ),
    (
        "otel",
        ("pacore_graph.otel",),
        "spans of a run: they read the config and the records",
    ),
    (
        "graph",
        ("pacore_graph.graph",),
        "the LangGraph graph, its nodes and explorers: calls models, traces, is controlled",
    ),
    (
        "served graphs",
        ("pacore_graph.graphs",),
        "the ready graphs (repo folder graphs/; langgraph.json serves one): each"
        " build_pacore_graph over the graph's parts",
    ),
    (
        "runs",
        ("pacore_graph.runs",),
        "durable runs, checkpoints and results files around a graph",
    ),
    ("eval", ("pacore_graph.eval",), "graders and the harness: run graphs, grade them"),
    (
        "message graph",
        ("pacore_graph.message_graph",),
        "the message graph of a run, with its grades",
    ),
    ("rl", ("pacore_graph.rl",), "RL export and training: episodes from graded runs"),
    (
        "integrations",
        ("pacore_graph.integrations",),
        "other tools' plug-ins (Inspect AI's model provider): run the methods by name",
    ),
    ("serve", ("pacore_graph.serve",), "the OpenAI-compatible server"),
    ("cli", ("pacore_graph.cli", "pacore_graph.__main__"), "the ``pacore`` command: everything"),
)

#: Imports that run back up a layer today, each with why and what removes it.
#: Nothing else may.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}

#: Circles through imports inside functions (module-level imports have none).
KNOWN_CIRCLES: dict[frozenset[str], str] = {}

#: The layers below evaluation: the core that must run without it.
CORE_TOP = "runs"
RANK = {name: rank for rank, (name, _, _) in enumerate(LAYERS)}


def module_name(path: Path) -> str:
    """The installed name of a file of one of the :data:`ROOTS`."""
    for package, root in ROOTS.items():
        if path.is_relative_to(root):
            parts = (*package.split("."), *path.relative_to(root).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(f"{path} is in none of the scanned folders")


MODULES: dict[str, Path] = {
    module_name(p): p for root in ROOTS.values() for p in sorted(root.rglob("*.py"))
}


def layer_of(name: str) -> str:
    """The layer of the longest prefix in :data:`LAYERS` that ``name`` is or lies under."""
    best, best_len = "", -1
    for layer, prefixes, _ in LAYERS:
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    return best


def resolve(name: str) -> str:
    """The module an imported name lies in (``pacore_graph.llm.client.X`` -> its module)."""
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """Import statements under ``if TYPE_CHECKING:``, which never run."""
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                found.update(ast.walk(child))
    return found


def _imports(path: Path, *, module_level_only: bool, running_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    if module_level_only:
        nodes = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    if running_only:
        skipped = _type_checking_only(tree)
        nodes = [n for n in nodes if n not in skipped]
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        names.add(base)
        names.update(f"{base}.{alias.name}" for alias in node.names)
    return {resolve(n) for n in names if n == "pacore_graph" or n.startswith("pacore_graph.")}


def imported_modules(
    path: Path, *, module_level_only: bool = False, running_only: bool = False
) -> set[str]:
    """Package modules an import anywhere in the file names (relative ones resolved).

    ``module_level_only`` keeps the top-level statements (function bodies do
    not run at import); ``running_only`` drops ``TYPE_CHECKING`` blocks, which
    never run. Both are for circles: an upward import is one in any form.
    """
    names = _imports(path, module_level_only=module_level_only, running_only=running_only)
    return names - {module_name(path)}


def scanned() -> list[Path]:
    """Every module but the package's ``__init__`` (its imports are for type checkers only)."""
    return [p for name, p in MODULES.items() if name != "pacore_graph"]


def test_every_module_has_a_layer_and_every_layer_has_modules() -> None:
    assert all(layer_of(name) for name in MODULES), [n for n in MODULES if not layer_of(n)]
    used = {layer_of(name) for name in MODULES}
    assert used == set(RANK)
    assert {"pacore_graph.graphs.pacore", "pacore_graph.tools.sandbox.local"} <= set(MODULES)


def test_every_layer_is_whole_folders() -> None:
    """A prefix names a folder or a top-level module, never one module inside a folder."""
    for layer, prefixes, _ in LAYERS:
        for prefix in prefixes:
            assert prefix in MODULES, (layer, prefix)
            path = MODULES[prefix]
            assert path.name == "__init__.py" or path.parent == PACKAGE, (layer, prefix)


def test_the_layer_of_a_module_is_its_longest_prefix() -> None:
    assert layer_of("pacore_graph.values.records") == "values"
    assert layer_of("pacore_graph.tools.sandbox.local") == "tools"
    assert layer_of("pacore_graph.graph.builder") == "graph"
    assert layer_of("pacore_graph.graphs.pacore") == "served graphs"
    assert layer_of("pacore_graph.errors") == "base"


@pytest.mark.parametrize("path", scanned(), ids=lambda p: module_name(p))
def test_no_module_imports_a_layer_above_its_own(path: Path) -> None:
    own = module_name(path)
    upward = sorted(
        name
        for name in imported_modules(path)
        if RANK[layer_of(name)] > RANK[layer_of(own)] and (own, name) not in KNOWN_UPWARD
    )
    assert not upward, f"{own} ({layer_of(own)}) imports {upward}"


def test_the_known_upward_imports_still_exist() -> None:
    """An entry the code no longer needs must go, so the table never hides a new one."""
    for own, name in KNOWN_UPWARD:
        assert name in imported_modules(MODULES[own]), (own, name)


def _graph(*, module_level_only: bool) -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in scanned():
        own = module_name(path)
        graph.add_node(own)
        for name in imported_modules(path, module_level_only=module_level_only, running_only=True):
            if name in MODULES and name != "pacore_graph":
                graph.add_edge(own, name)
    return graph


def test_module_level_imports_form_no_circle() -> None:
    graph = _graph(module_level_only=True)
    assert graph.number_of_edges() > 100  # the scan sees the package's real imports
    assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))[:5]


def test_the_only_circles_are_the_known_ones() -> None:
    """Function-level imports included: every circle is in :data:`KNOWN_CIRCLES`."""
    circles = {frozenset(c) for c in nx.simple_cycles(_graph(module_level_only=False))}
    assert circles == set(KNOWN_CIRCLES), sorted(map(sorted, circles ^ set(KNOWN_CIRCLES)))


def test_the_core_imports_with_evaluation_blocked() -> None:
    """Import every core module in a fresh interpreter where the layers above cannot load."""
    modules = [n for n in MODULES if RANK[layer_of(n)] <= RANK[CORE_TOP]]
    forbidden = tuple(
        prefix
        for layer, prefixes, _ in LAYERS
        if RANK[layer] > RANK[CORE_TOP]
        for prefix in prefixes
    )
    assert "pacore_graph.eval" in forbidden and "pacore_graph.graph.builder" in modules
    script = f"""
import importlib, importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == top or name.startswith(top + ".") for top in {forbidden!r}):
            raise ImportError(f"blocked layer above the core: {{name}}")
        return None

sys.meta_path.insert(0, Block())
for name in {modules!r}:
    importlib.import_module(name)
loaded = sorted(
    m for m in sys.modules if any(m == t or m.startswith(t + ".") for t in {forbidden!r})
)
assert not loaded, loaded
print("ok", len({modules!r}))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")


LAYOUT = Path(__file__).parents[1] / "docs" / "layout.md"


def layout_entries(text: str) -> list[tuple[tuple[str, ...], str]]:
    """docs/layout.md's first text block: (the entry's folders or modules, its text), in order.

    An entry starts at column 0 (``settings/``, ``errors, lazy``) and runs on
    over the indented lines below it.
    """
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    entries: list[tuple[tuple[str, ...], str]] = []
    for line in block.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            head, _, rest = line.partition("  ")
            entries.append((tuple(h.strip() for h in head.split(",")), rest.strip()))
        else:
            heads, body = entries[-1]
            entries[-1] = (heads, f"{body} {line.strip()}")
    return entries


def _prefix(head: str) -> str:
    return f"pacore_graph.{head.removesuffix('/')}"


def test_docs_layout_lists_the_layers_in_the_tables_order() -> None:
    """Every folder and top-level module of the table is an entry, in the table's order."""
    entries = layout_entries(LAYOUT.read_text(encoding="utf-8"))
    prefixes = [_prefix(head) for heads, _ in entries for head in heads]
    assert set(prefixes) == {p for _, ps, _ in LAYERS for p in ps} - {"pacore_graph"}
    order = [layer_of(p) for p in prefixes]
    assert [layer for i, layer in enumerate(order) if i == 0 or order[i - 1] != layer] == [
        name for name, _, _ in LAYERS
    ]


def test_docs_layout_names_every_module() -> None:
    """Each module's name (and its subfolder's) is a word of its folder's entry."""
    entries = layout_entries(LAYOUT.read_text(encoding="utf-8"))
    texts = {_prefix(head): text for heads, text in entries for head in heads}
    missing = []
    for name in MODULES:
        if name == "pacore_graph" or name in texts:
            continue
        folder = max((p for p in texts if name.startswith(p + ".")), key=len)
        for part in name[len(folder) + 1 :].split("."):
            if not re.search(rf"(?<!\w){re.escape(part)}(?!\w)", texts[folder]):
                missing.append(name)
    assert not missing, f"docs/layout.md does not name {missing}"
