"""message_graph/export: the graph as JSON and GraphML, read back unchanged."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import networkx as nx
from message_graph_support import (
    edge_set,
    scripted,
)

from pacore_graph.message_graph import (
    EDGES_KEY,
    from_json,
    message_graph,
    to_json,
    write_graphml,
    write_json,
)


def test_json_round_trip_under_a_stable_key_without_warnings(tmp_path: Path) -> None:
    g = message_graph(scripted(), ground_truth="42")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = to_json(g)
        back = from_json(json.loads(json.dumps(data)))
    assert EDGES_KEY == "edges" and "edges" in data and "links" not in data
    assert len(data["nodes"]) == 7 and len(data["edges"]) == g.number_of_edges()
    assert dict(back.nodes(data=True)) == dict(g.nodes(data=True))
    assert edge_set(back) == edge_set(g)
    assert back.graph == g.graph and back.is_directed()

    path = write_json(g, tmp_path / "sub" / "g.json")
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk == json.loads(json.dumps(data))
    assert on_disk["graph"]["schedule"] == [4, 2, 1]


def test_graphml_round_trip_keeps_counts_and_scalars(tmp_path: Path) -> None:
    g = message_graph(scripted(), ground_truth="42")
    path = write_graphml(g, tmp_path / "g.graphml")
    back = nx.read_graphml(path)
    assert back.number_of_nodes() == g.number_of_nodes()
    assert back.number_of_edges() == g.number_of_edges()
    for node, attrs in g.nodes(data=True):
        for key in ("round", "index", "answer", "failed", "error", "correct", "truncated"):
            assert back.nodes[node][key] == attrs[key], (node, key)
    assert back.nodes["r0.1"]["failed"] is True and back.nodes["r0.3"]["round"] == 0
    assert edge_set(back) == edge_set(g)
    assert json.loads(back.graph["schedule"]) == [4, 2, 1]
    assert back.graph["problem_id"] == "p1"
    # None cannot be written to GraphML: it becomes "" in the copy, not in the graph.
    assert g.graph["ground_truth"] == "42" and back.graph["final_answer"] == "42"
    assert message_graph(scripted()).graph["ground_truth"] is None
    none_back = nx.read_graphml(write_graphml(message_graph(scripted()), tmp_path / "n.graphml"))
    assert none_back.graph["ground_truth"] == ""
    assert isinstance(g.graph["schedule"], list)  # the original is untouched
