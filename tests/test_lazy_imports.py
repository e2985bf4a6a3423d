"""Lazy imports: every public name still imports, and light entry points stay light.

Start-up speed itself lives in ``benchmarks/``; these tests check the
mechanism (which modules a fresh interpreter has loaded), which would fail if
someone put a heavy import back at the top of ``pacore_graph/__init__.py`` or
``pacore_graph/cli.py``.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import pacore_graph

HEAVY = ("langgraph", "langchain_core", "pydantic", "aiohttp", "opentelemetry", "jinja2", "asyncio")


@pytest.mark.parametrize("name", sorted(pacore_graph.__all__))
def test_every_public_name_imports_from_the_package(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from pacore_graph import {name}", namespace)  # the statement users write
    assert namespace[name] is getattr(pacore_graph, name)


def test_public_names_are_the_objects_of_their_modules() -> None:
    assert (
        pacore_graph.build_pacore_graph
        is importlib.import_module("pacore_graph.graph.builder").build_pacore_graph
    )
    assert pacore_graph.PRESETS is importlib.import_module("pacore_graph.settings.config").PRESETS
    assert set(pacore_graph.__all__) <= set(dir(pacore_graph))


def test_unknown_names_still_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = pacore_graph.no_such_name


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {m.split(".")[0] for m in json.loads(out.stdout.strip().splitlines()[-1])}


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    loaded = _loaded_after("import pacore_graph")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_the_command_line_parser_loads_no_heavy_dependency() -> None:
    loaded = _loaded_after(
        "from pacore_graph.cli import build_parser\n"
        "build_parser().parse_args(['run', 'q', '--preset', 'high'])"
    )
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_help_still_lists_the_presets() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pacore_graph.cli", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "high" in out.stdout and "--preset" in out.stdout


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_command_loads_only_its_own_module() -> None:
    """``pacore run`` does not import (or, without bytecode, compile) the other commands."""
    loaded = _modules_after(
        "from pacore_graph.cli import main\n"
        # refused by the run command itself (an empty question): exit 2, nothing sent
        "main(['run', ' ', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm'])"
    )
    assert "pacore_graph.cli.run" in loaded
    others = {f"pacore_graph.cli.{name}" for name in ("eval", "swe", "serve", "rl", "data")}
    assert not loaded & others, loaded & others
    assert not loaded & {"pacore_graph.cli.graph", "pacore_graph.cli.model"}


def test_a_plain_run_imports_no_other_methods_module() -> None:
    """``pacore run "Q"`` builds PaCoRe alone: no graphs/ module of another method (issue 32)."""
    from pacore_graph.testing import ScriptedServer

    with ScriptedServer(model="m").run_in_thread() as srv:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "import atexit, json, sys\n"
                "atexit.register(lambda: print(json.dumps(sorted(sys.modules))))\n"
                "from pacore_graph.cli import main\n"
                f"main(['run', 'What is 2 + 2?', '--base-url', '{srv.base_url}', '--model', 'm',"
                " '--json'])",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "pacore_graph.graph.builder" in loaded and "pacore_graph.cli.run" in loaded
    graphs = {m for m in loaded if m.startswith("pacore_graph.graphs")}
    assert not graphs, graphs
    assert not {m for m in loaded if m.startswith("pacore_graph.eval")}


def test_the_integrations_packages_load_only_when_used() -> None:
    """Inspect AI, verifiers and the anthropic SDK: each behind its extra, none loaded by
    the server (which answers Anthropic's API itself), an eval or the RL layer."""
    loaded = _loaded_after(
        "import pacore_graph.serve.app, pacore_graph.eval.harness, pacore_graph.rl.recipe\n"
        "import pacore_graph.integrations.method_runner\n"
        "from pacore_graph.cli import main\n"
        "try:\n"
        "    main(['run', 'q', '--base-url', 'no-url', '--model', 'm'])\n"
        "except SystemExit:\n"
        "    pass"
    )
    assert not loaded & {"inspect_ai", "verifiers", "anthropic"}, loaded
