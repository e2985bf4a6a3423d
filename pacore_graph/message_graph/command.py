"""``pacore graph``: find one run in a results file, build its message graph, draw and export it.

The output's suffix picks the drawing: ``.html`` (or ``.htm``) is the
interactive page of :mod:`~pacore_graph.message_graph.viewer`, anything else
a matplotlib picture (PNG by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pacore_graph.message_graph.dag import message_graph
from pacore_graph.message_graph.draw import draw_message_graph
from pacore_graph.message_graph.export import write_graphml, write_json
from pacore_graph.message_graph.lookup import find_run
from pacore_graph.message_graph.viewer import write_message_graph_html

if TYPE_CHECKING:
    from pacore_graph.eval.graders import Grader

__all__ = ["HTML_SUFFIXES", "graph_command"]

HTML_SUFFIXES = (".html", ".htm")


def graph_command(
    results: Path,
    problem_id: str,
    out: Path,
    *,
    method: str | None = None,
    sample: int = 0,
    json_out: Path | None = None,
    graphml_out: Path | None = None,
    grader: Grader | None = None,
) -> Path:
    """``pacore graph``: load one run, build its graph, draw it; optionally export it.

    The run's ground truth (when its line has one) grades every node, with
    ``grader`` or the math grader. ``out`` ending in ``.html`` writes the
    self-contained page; any other suffix the picture. Returns its path.
    """
    found = find_run(results, problem_id, method=method, sample=sample)
    g = message_graph(found.result, ground_truth=found.ground_truth, grader=grader)
    if json_out is not None:
        write_json(g, json_out)
    if graphml_out is not None:
        write_graphml(g, graphml_out)
    if Path(out).suffix.lower() in HTML_SUFFIXES:
        return write_message_graph_html(g, found.result, out, conversation=found.messages)
    return draw_message_graph(g, out)
