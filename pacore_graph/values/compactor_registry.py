"""The compactors a request may name: the built-ins plus those a deployment registers in code.

A served graph's caller picks a compactor per run (``config["configurable"]
["compactor"]``) and a ``pacore serve`` client per request (``compactor`` in
the body). Such a name comes from someone else, so it must never import
anything: ``"sys:exit"`` as a ``module:attr`` spec would run code in the
server. A :class:`CompactorRegistry` resolves request names to the built-ins
(``conclusion``, ``answer``, ``budget:N``) and to the compactor objects a
deployment registered when it built the graph::

    build_pacore_graph(client, compactors={"short": TokenBudgetCompactor(64)})
    # a run may now say {"configurable": {"compactor": "short"}}

``module:attr`` stays what the builder and the operator's command line accept
(:func:`~pacore_graph.values.compaction.compactor_from_name`); a registry never does.
The registry is immutable once built: what a deployment offers is decided in
code, not by a request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from pacore_graph.values.compaction import Compactor, builtin_compactor

__all__ = ["BUILTIN_COMPACTOR_NAMES", "CompactorRegistry"]

#: What every registry offers, as a request would spell it.
BUILTIN_COMPACTOR_NAMES = ("conclusion", "answer", "budget:N")

_RESERVED = frozenset({"conclusion", "answer", "budget", "token-budget"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class CompactorRegistry:
    """Request-facing compactor names: built-ins and registered objects, never imports."""

    __slots__ = ("_registered",)

    def __init__(self, compactors: Mapping[str, Compactor] | None = None) -> None:
        registered: dict[str, Compactor] = {}
        for name, compactor in (compactors or {}).items():
            if not isinstance(name, str) or not _NAME.fullmatch(name) or name in _RESERVED:
                raise ValueError(
                    f"compactor name {name!r} cannot be registered: use letters, digits, "
                    "'_', '.', '-' (no ':'), not a built-in name"
                )
            if not callable(getattr(compactor, "compact", None)):
                raise TypeError(f"registered compactor {name!r} has no compact(trajectory)")
            registered[name] = compactor
        self._registered: Mapping[str, Compactor] = MappingProxyType(registered)

    @classmethod
    def of(cls, value: CompactorRegistry | Mapping[str, Compactor] | None) -> CompactorRegistry:
        """A registry from a registry, a ``{name: compactor}`` mapping or nothing."""
        return value if isinstance(value, CompactorRegistry) else cls(value)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a request may use (``budget:N`` stands for any N)."""
        return (*BUILTIN_COMPACTOR_NAMES, *sorted(self._registered))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip() in self._registered

    def resolve(self, name: str) -> Compactor:
        """The compactor ``name`` offers; ValueError naming the choices otherwise.

        Nothing is imported whatever ``name`` holds.
        """
        if not isinstance(name, str):
            raise ValueError(f"compactor must be a string, got {type(name).__name__}")
        spec = name.strip()
        found = self._registered.get(spec)
        if found is not None:
            return found
        builtin = builtin_compactor(spec)
        if builtin is not None:
            return builtin
        raise ValueError(
            f"compactor {spec[:80]!r} is not offered; choose {', '.join(self.names)} "
            "(module:attr is for the builder and the command line only)"
        )
