"""The tests mirror the code: each module of the mirrored folders has a test file of its name.

Issue 19 asked for tests "grouped to mirror the new folders": a reader who
opens ``pacore_graph/llm/retry.py`` should find its tests in
``tests/llm/test_retry.py``, not spread over files named for something
else. This test lists every module of the folders below and fails for one
that has no such file, so a new module cannot arrive without one.

The test file of ``<folder>/<sub>/<module>.py`` is
``tests/<folder>/<sub>/test_<module>.py``. pytest's default import mode
imports each test file under its base name, so two test files may not share
one: where two modules of the package share a name (``embedded/protocol``
and ``tools/sandbox/protocol``), each one's test file carries its parent
folder's name too (``test_embedded_protocol.py``, ``test_sandbox_protocol.py``).
The rule is derived from the package's own module names, never listed by hand.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pacore_graph

PACKAGE = Path(pacore_graph.__file__).parent
TESTS = Path(__file__).parent


def _located(name: str) -> Path:
    """Where an installed subpackage's files are (``pacore_graph.tools`` is the repo's tools/)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, name
    return Path(next(iter(spec.submodule_search_locations)))


#: Mirrored trees: (the folder's files, its tests' folder): every folder of the
#: package (subfolders such as ``eval/benchmarks`` within theirs), graphs/ and
#: tools/. The top-level modules are mirrored at tests/ itself.
MIRRORED: tuple[tuple[Path, Path], ...] = (
    *(
        (PACKAGE / folder, TESTS / folder)
        for folder in (
            "values",
            "settings",
            "control",
            "llm",
            "embedded",
            "otel",
            "graph",
            "runs",
            "eval",
            "message_graph",
            "rl",
            "integrations",
            "serve",
            "cli",
            "testing",
        )
    ),
    (_located("pacore_graph.tools"), TESTS / "tools"),
    (_located("pacore_graph.graphs"), TESTS / "graphs"),
)
TOP_LEVEL = ("errors", "lazy")

#: Modules with nothing a test could check, each with why. Empty today: even
#: the protocol-only module has behaviour (which clients satisfy it).
EXEMPT: dict[str, str] = {}


def _is_module(path: Path) -> bool:
    return path.name not in ("__init__.py", "__main__.py")


def _all_modules() -> list[Path]:
    """Every module of the installed package, graphs/ and tools/ included."""
    roots = (PACKAGE, _located("pacore_graph.graphs"), _located("pacore_graph.tools"))
    return [p for root in roots for p in root.rglob("*.py") if _is_module(p)]


def mirrored_modules() -> dict[str, tuple[Path, Path]]:
    """Module (as a path under its tree, e.g. ``tools/sandbox/paths``) -> (its file, test dir)."""
    out: dict[str, tuple[Path, Path]] = {}
    for source, tests in MIRRORED:
        for path in sorted(source.rglob("*.py")):
            if not _is_module(path) or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(source)
            out[f"{tests.name}/{relative.with_suffix('').as_posix()}"] = (
                path,
                tests / relative.parent,
            )
    for name in TOP_LEVEL:
        out[name] = (PACKAGE / f"{name}.py", TESTS)
    return out


def expected_test_file(module: Path, test_dir: Path, shared: Counter[str]) -> Path:
    """The test file a module must have: ``test_<module>.py``, parent-qualified if shared."""
    if shared[module.stem] > 1:
        return test_dir / f"test_{module.parent.name}_{module.stem}.py"
    return test_dir / f"test_{module.stem}.py"


def expected_files() -> dict[str, Path]:
    shared = Counter(p.stem for p in _all_modules())
    return {
        name: expected_test_file(path, test_dir, shared)
        for name, (path, test_dir) in mirrored_modules().items()
    }


def test_the_scan_sees_every_mirrored_folder() -> None:
    """A wrong path would find no modules and pass vacuously: each tree has some."""
    found = mirrored_modules()
    for source, tests in MIRRORED:
        assert any(name.startswith(f"{tests.name}/") for name in found), source
    assert "llm/retry" in found and "tools/sandbox/paths" in found and "lazy" in found
    assert "graphs/pacore" in found


def test_every_folder_of_the_package_is_mirrored() -> None:
    """A new layer folder must join MIRRORED, or its modules would go unchecked."""
    sources = {source for source, _ in MIRRORED}
    folders = {p.parent for p in PACKAGE.glob("*/__init__.py")}
    assert folders <= sources, sorted(str(f.relative_to(PACKAGE)) for f in folders - sources)
    top = {p.stem for p in PACKAGE.glob("*.py") if _is_module(p)}
    assert top == set(TOP_LEVEL)


def test_a_shared_module_name_is_qualified_by_its_folder() -> None:
    files = expected_files()
    shared = Counter(p.stem for p in _all_modules())
    assert shared["protocol"] > 1  # embedded/protocol and tools/sandbox/protocol
    assert files["embedded/protocol"].name == "test_embedded_protocol.py"
    assert files["tools/sandbox/protocol"].name == "test_sandbox_protocol.py"
    assert files["llm/retry"] == TESTS / "llm" / "test_retry.py"
    assert shared["streaming"] > 1  # graph/streaming and serve/streaming
    assert files["graph/streaming"].name == "test_graph_streaming.py"


def test_every_module_has_a_test_file_of_its_name() -> None:
    missing = sorted(
        f"{name} -> {path.relative_to(TESTS.parent)}"
        for name, path in expected_files().items()
        if name not in EXEMPT and not path.is_file()
    )
    assert not missing, "modules without a test file of their name:\n" + "\n".join(missing)


def test_test_file_names_are_unique() -> None:
    """pytest imports test files by base name: two of one name break collection."""
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, count in names.items() if count > 1]


def test_the_exemptions_are_still_needed() -> None:
    """An exempt module that was removed or got its test file must leave the list."""
    files = expected_files()
    for name in EXEMPT:
        assert name in files, f"{name} is no longer a module"
        assert not files[name].is_file(), f"{name} has {files[name].name} now: drop its exemption"
