"""Message graphs to files other tools read: node-link JSON and GraphML (Gephi, yEd, Cytoscape)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import networkx as nx

__all__ = ["EDGES_KEY", "from_json", "to_json", "write_graphml", "write_json"]

EDGES_KEY = "edges"
"""Key of the edge list in :func:`to_json` output. networkx's default changed
from ``"links"`` to ``"edges"`` (3.4 warned, 3.6 switched), so it is always
passed explicitly: files written with any networkx version read the same."""


@cache
def _edges_keyword() -> str:
    """``edges=`` (networkx >= 3.4) or ``link=`` (older): the name of the edge-list option."""
    params = inspect.signature(nx.node_link_data).parameters
    return "edges" if "edges" in params else "link"


def to_json(g: nx.DiGraph) -> dict[str, Any]:
    """Node-link JSON of the graph (``nodes``, ``edges``, ``graph``), ready for ``json.dumps``."""
    data: dict[str, Any] = nx.node_link_data(g, **{_edges_keyword(): EDGES_KEY})
    return data


def from_json(data: Mapping[str, Any]) -> nx.DiGraph:
    """Inverse of :func:`to_json`, whatever the installed networkx calls its edge option."""
    graph: nx.DiGraph = nx.node_link_graph(
        dict(data), directed=True, multigraph=False, **{_edges_keyword(): EDGES_KEY}
    )
    return graph


def write_json(g: nx.DiGraph, path: Path) -> Path:
    """Write :func:`to_json` to ``path`` (UTF-8, indented); return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(g), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _graphml_value(value: Any) -> Any:
    """GraphML holds only scalars: None becomes ``""``, lists and mappings JSON text."""
    if value is None:
        return ""
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset | Mapping):
        return json.dumps(list(value) if isinstance(value, set | frozenset) else value)
    return str(value)


def write_graphml(g: nx.DiGraph, path: Path) -> Path:
    """Write the graph as GraphML; return ``path``.

    GraphML attributes are typed scalars, so a copy is written in which
    ``None`` is ``""`` and lists (``schedule``) are JSON text; the graph
    passed in is left as it is.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = nx.DiGraph()
    out.graph.update({k: _graphml_value(v) for k, v in g.graph.items()})
    for node, attrs in g.nodes(data=True):
        out.add_node(node, **{k: _graphml_value(v) for k, v in attrs.items()})
    for u, v, attrs in g.edges(data=True):
        out.add_edge(u, v, **{k: _graphml_value(x) for k, x in attrs.items()})
    nx.write_graphml(out, path)
    return path
