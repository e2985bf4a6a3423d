"""``pacore graph``: find one run in a results file, build its message graph, draw and export it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pacore_graph.message_graph.dag import message_graph
from pacore_graph.message_graph.draw import draw_message_graph
from pacore_graph.message_graph.export import write_graphml, write_json
from pacore_graph.message_graph.lookup import load_result

if TYPE_CHECKING:
    from pacore_graph.eval.graders import Grader

__all__ = ["graph_command"]


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
    ``grader`` or the math grader. Returns the path of the drawing.
    """
    result, ground_truth = load_result(results, problem_id, method=method, sample=sample)
    g = message_graph(result, ground_truth=ground_truth, grader=grader)
    if json_out is not None:
        write_json(g, json_out)
    if graphml_out is not None:
        write_graphml(g, graphml_out)
    return draw_message_graph(g, out)
