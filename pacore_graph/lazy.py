"""Package names that load their module on first use (PEP 562).

``pacore_graph``, ``pacore_graph.rl`` and ``pacore_graph.testing`` export
names whose modules pull in LangGraph, torch/TRL or aiohttp; importing those
at package import would make ``pacore --help`` (and ``python -m
pacore_graph.testing.scripted_server``, which ``runpy`` warns about when the
module is imported twice) pay for all of it. Each package keeps a table of
name -> module and gets its ``__getattr__`` from :func:`lazy_getattr`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(
    package: str, locations: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``package.<locations[name]>`` when ``name`` is used.

    The value is stored in ``namespace`` (the package's ``globals()``), so
    later lookups do not reach this function.
    """

    def __getattr__(name: str) -> Any:
        module = locations.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
