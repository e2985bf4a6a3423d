"""The compactor names a request may use (values/compactor_registry): offered, never imported.

Resolving a request's name through a whole graph run is in
tests/settings/test_per_run.py; here the registry is used on its own.
"""

from __future__ import annotations

import pytest

from pacore_graph.values.compaction import AnswerCompactor, builtin_compactor
from pacore_graph.values.compactor_registry import BUILTIN_COMPACTOR_NAMES, CompactorRegistry


def test_registry_refuses_names_that_shadow_built_ins_or_look_like_imports() -> None:
    for name in ("conclusion", "budget", "mod:attr", "", "a b"):
        with pytest.raises(ValueError, match="cannot be registered"):
            CompactorRegistry({name: AnswerCompactor()})
    with pytest.raises(TypeError, match="compact"):
        CompactorRegistry({"x": object()})  # type: ignore[dict-item]
    assert CompactorRegistry({"x": AnswerCompactor()}).names == (
        "conclusion",
        "answer",
        "budget:N",
        "x",
    )


def test_registered_names_resolve_to_the_registered_objects() -> None:
    short, brief = AnswerCompactor(), AnswerCompactor()
    registry = CompactorRegistry({"short": short, "brief": brief})
    assert registry.resolve("short") is short
    assert registry.resolve("  brief ") is brief  # a request's stray spaces
    assert "short" in registry and " short " in registry
    assert "conclusion" not in registry and 3 not in registry  # only what was registered
    assert registry.names == (*BUILTIN_COMPACTOR_NAMES, *sorted(["short", "brief"]))


@pytest.mark.parametrize("name", ["conclusion", "answer", "budget:16"])
def test_built_in_names_resolve_like_the_builtins(name: str) -> None:
    resolved = CompactorRegistry().resolve(name)
    expected = builtin_compactor(name)
    assert expected is not None and type(resolved) is type(expected)


@pytest.mark.parametrize("name", ["long", "os:system", "Conclusion"])
def test_an_unknown_name_lists_what_is_offered(name: str) -> None:
    registry = CompactorRegistry({"short": AnswerCompactor()})
    with pytest.raises(ValueError, match="not offered") as caught:
        registry.resolve(name)
    for offered in registry.names:
        assert offered in str(caught.value)
    with pytest.raises(ValueError, match="must be a string"):
        registry.resolve(7)  # type: ignore[arg-type]


def test_what_a_registry_offers_is_fixed_when_it_is_built() -> None:
    compactors = {"short": AnswerCompactor()}
    registry = CompactorRegistry(compactors)
    compactors["later"] = AnswerCompactor()  # the caller's dict, changed afterwards
    assert "later" not in registry
    assert CompactorRegistry.of(registry) is registry
    assert CompactorRegistry.of(None).names == BUILTIN_COMPACTOR_NAMES
    assert "short" in CompactorRegistry.of(compactors)
