"""``lazy_getattr``: a package name loads its module on first use, once, and unknown names fail.

Checked on a package made for the test (so what is imported, and when, is
visible in ``sys.modules``); that the package's real entry points stay
light is ``test_lazy_imports.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.lazy import lazy_getattr

PACKAGE = "pacore_lazy_probe"


@pytest.fixture
def probe_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A package whose module ``heavy`` counts how many times it was executed."""
    root = tmp_path / PACKAGE
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "heavy.py").write_text(
        "import builtins\n"
        "builtins.pacore_lazy_loads = getattr(builtins, 'pacore_lazy_loads', 0) + 1\n"
        "VALUE = object()\n"
        "OTHER = 'other'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, Any] = {}
    yield namespace
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    import builtins

    if hasattr(builtins, "pacore_lazy_loads"):
        del builtins.pacore_lazy_loads


def loads() -> int:
    import builtins

    return int(getattr(builtins, "pacore_lazy_loads", 0))


def test_nothing_is_imported_until_a_name_is_used(probe_package: dict[str, Any]) -> None:
    getattr_ = lazy_getattr(PACKAGE, {"VALUE": "heavy"}, probe_package)
    assert f"{PACKAGE}.heavy" not in sys.modules and loads() == 0
    value = getattr_("VALUE")
    assert value is sys.modules[f"{PACKAGE}.heavy"].VALUE
    assert loads() == 1


def test_the_value_is_stored_so_later_lookups_skip_the_hook(
    probe_package: dict[str, Any],
) -> None:
    getattr_ = lazy_getattr(PACKAGE, {"VALUE": "heavy", "OTHER": "heavy"}, probe_package)
    first = getattr_("VALUE")
    assert probe_package == {"VALUE": first}  # only the name used is stored
    assert getattr_("OTHER") == "other" and getattr_("VALUE") is first
    assert loads() == 1  # one module, executed once for both names


def test_an_unknown_name_is_an_attribute_error_naming_the_package(
    probe_package: dict[str, Any],
) -> None:
    getattr_ = lazy_getattr(PACKAGE, {"VALUE": "heavy"}, probe_package)
    with pytest.raises(AttributeError, match=f"module '{PACKAGE}' has no attribute 'nope'"):
        getattr_("nope")
    assert loads() == 0 and probe_package == {}


def test_hasattr_on_a_lazy_package_is_false_for_unknown_names() -> None:
    """The real packages use it: ``hasattr`` must not raise anything but AttributeError."""
    import pacore_graph.testing as testing

    assert not hasattr(testing, "no_such_name")
    assert hasattr(testing, "ScriptedServer")
