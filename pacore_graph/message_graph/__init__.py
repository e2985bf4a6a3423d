"""The message graph of a run: which trajectories' messages fed which later trajectory.

One concept per module:

- :mod:`~pacore_graph.message_graph.dag`: the ``networkx.DiGraph`` of a
  :class:`~pacore_graph.values.records.PaCoReResult` (trajectories as nodes, consumed
  messages as edges), graded against a ground truth when one is known;
- :mod:`~pacore_graph.message_graph.export`: node-link JSON and GraphML;
- :mod:`~pacore_graph.message_graph.lookup`: one run out of a ``results.jsonl``;
- :mod:`~pacore_graph.message_graph.draw`: the picture (matplotlib, the
  ``eval`` extra, imported only when drawing);
- :mod:`~pacore_graph.message_graph.viewer`: the run as one self-contained
  HTML page (click a trajectory, hover an edge);
- :mod:`~pacore_graph.message_graph.command`: what ``pacore graph`` does.

Grading needs :mod:`pacore_graph.eval`, so this package is a layer above the
core: nothing in the core (records, graph, compaction, ...) imports it.
"""

from __future__ import annotations

from pacore_graph.message_graph.command import graph_command
from pacore_graph.message_graph.dag import message_graph
from pacore_graph.message_graph.draw import (
    FAILED_COLOR,
    OTHER_COLOR,
    EdgeGroup,
    answer_colors,
    draw_message_graph,
    edge_groups,
    message_graph_figure,
)
from pacore_graph.message_graph.export import (
    EDGES_KEY,
    from_json,
    to_json,
    write_graphml,
    write_json,
)
from pacore_graph.message_graph.lookup import FoundRun, ResultLookupError, find_run, load_result
from pacore_graph.message_graph.viewer import message_graph_html, write_message_graph_html

__all__ = [
    "EDGES_KEY",
    "FAILED_COLOR",
    "OTHER_COLOR",
    "EdgeGroup",
    "FoundRun",
    "ResultLookupError",
    "answer_colors",
    "draw_message_graph",
    "edge_groups",
    "find_run",
    "from_json",
    "graph_command",
    "load_result",
    "message_graph",
    "message_graph_figure",
    "message_graph_html",
    "to_json",
    "write_graphml",
    "write_json",
    "write_message_graph_html",
]
