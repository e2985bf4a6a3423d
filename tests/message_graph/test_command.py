"""message_graph/command: pacore graph, from a results file to a picture and exports."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
from cli_support import run_argv
from message_graph_support import (
    png_size,
    run_line,
    scripted,
    write_lines,
)

from pacore_graph.message_graph import (
    graph_command,
)


def test_graph_command_loads_draws_and_exports(tmp_path: Path) -> None:
    results = write_lines(
        tmp_path / "results.jsonl", [run_line("p1", scripted(), ground_truth="42")]
    )
    out = graph_command(
        results,
        "p1",
        tmp_path / "run.png",
        json_out=tmp_path / "run.json",
        graphml_out=tmp_path / "run.graphml",
    )
    assert out == tmp_path / "run.png"
    png_size(out)
    data = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    correct = {n["id"] for n in data["nodes"] if n["correct"]}
    assert correct == {"r0.0", "r0.3", "r1.0", "r2.0"}
    assert nx.read_graphml(tmp_path / "run.graphml").number_of_edges() == 8


def test_pacore_graph_command_draws_a_dataset_run(tmp_path: Path) -> None:
    """``pacore run --input`` then ``pacore graph --id``: the user's debugging path."""
    from pacore_graph.cli import main
    from pacore_graph.testing import ScriptedServer

    data = tmp_path / "data.jsonl"
    data.write_text(
        '{"id": "p1", "messages": [{"role": "user", "content": "What is 2+3?"}], '
        '"ground_truth": {"answer": "5"}}\n'
    )
    out = tmp_path / "results.jsonl"
    with ScriptedServer(model="m").run_in_thread() as srv:
        code = main(run_argv(data, out, "3,2", "--no-progress", base_url=srv.base_url, model="m"))
    assert code == 0
    png, js = tmp_path / "run.png", tmp_path / "run.json"
    assert main(["graph", str(out), "--id", "p1", "--out", str(png), "--json", str(js)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    graph = json.loads(js.read_text())
    assert len(graph["nodes"]) == 3 + 2 + 1
    assert len(graph["edges"]) == 3 * 2 + 2
    # An unknown id is bad input (exit 2), as the README's table says; it was 1, "run failed".
    assert main(["graph", str(out), "--id", "nope", "--out", str(png)]) == 2
    assert main(["graph", str(tmp_path / "missing.jsonl"), "--id", "p1", "--out", str(png)]) == 2
