"""The message graph: nodes, edges and grading from records, export, loading, drawing.

Most tests use hand-made records, whose references are chosen so that an
edge built from the wrong side, in the wrong order or to a failed call would
show; one runs the real graph with the fake model to check that what a run
records is what the graph shows.
"""

from __future__ import annotations

import json
import re
import struct
import sys
import warnings
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from cli_support import run_argv

from pacore_graph import PaCoReConfig, SamplingParams, ainvoke_pacore, build_pacore_graph
from pacore_graph.eval.graders import ExactGrader, Grade
from pacore_graph.graph.records import PaCoReResult, Trajectory
from pacore_graph.message_graph import (
    EDGES_KEY,
    FAILED_COLOR,
    OTHER_COLOR,
    ResultLookupError,
    answer_colors,
    draw_message_graph,
    edge_groups,
    find_run,
    from_json,
    graph_command,
    load_result,
    message_graph,
    message_graph_figure,
    to_json,
    write_graphml,
    write_json,
)
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply


def boxed(answer: str) -> str:
    return f"<think>scratch \\boxed{{0}}</think>So the answer is \\boxed{{{answer}}}."


def traj(r: int, i: int, answer: str | None, refs: tuple[int, ...] = (), **kw: Any) -> Trajectory:
    """A trajectory answering ``answer``; ``None`` makes it a failed call."""
    if answer is None:
        return Trajectory(round=r, index=i, error="HTTP 500: boom", references=refs, **kw)
    content = boxed(answer)
    return Trajectory(
        round=r,
        index=i,
        content=content,
        message=content.split("</think>")[1],
        finish_reason=kw.pop("finish_reason", "stop"),
        completion_tokens=kw.pop("completion_tokens", 10 * (r + 1) + i),
        prompt_tokens=5,
        references=refs,
        **kw,
    )


def scripted() -> PaCoReResult:
    """Rounds 4, 2, 1; r0.1 failed; references in deliberately unsorted prompt order."""
    rounds = (
        (
            traj(0, 0, "42"),
            traj(0, 1, None),
            traj(0, 2, "41"),
            traj(0, 3, "42", finish_reason="length"),
        ),
        (traj(1, 0, "42", (3, 0, 2)), traj(1, 1, "7", (2, 3, 0))),
        (traj(2, 0, "42", (1, 0)),),
    )
    final = rounds[-1][0]
    return PaCoReResult(
        answer=final.message or "",
        reasoning=None,
        rounds=rounds,
        schedule=(4, 2, 1),
        problem_id="p1",
        model="fake",
        preset="low",
    )


def wide(widths: tuple[int, ...], answers: int = 5) -> PaCoReResult:
    """Every trajectory reads every message of the previous round, in reverse order."""
    rounds = []
    for r, k in enumerate(widths):
        refs = tuple(reversed(range(widths[r - 1]))) if r else ()
        rounds.append(tuple(traj(r, i, str((i * 7 + r) % answers), refs) for i in range(k)))
    return PaCoReResult(
        answer=rounds[-1][0].message or "",
        reasoning=None,
        rounds=tuple(rounds),
        schedule=widths,
        problem_id="wide",
    )


def expected_edges(result: PaCoReResult) -> set[tuple[str, str, int]]:
    return {
        (f"r{t.round - 1}.{ref}", t.id, pos)
        for t in result.trajectories
        for pos, ref in enumerate(t.references, start=1)
    }


def edge_set(g: nx.DiGraph) -> set[tuple[str, str, int]]:
    return {(u, v, d["position"]) for u, v, d in g.edges(data=True)}


# --------------------------------------------------------------------------- building


def test_nodes_and_edges_follow_the_records() -> None:
    result = scripted()
    g = message_graph(result)
    assert isinstance(g, nx.DiGraph)
    assert g.number_of_nodes() == sum(result.schedule) == 7
    assert set(g.nodes) == {t.id for t in result.trajectories}
    assert edge_set(g) == expected_edges(result)
    # Positions are prompt order, not index order.
    assert g.edges["r0.3", "r1.0"]["position"] == 1
    assert g.edges["r0.2", "r1.0"]["position"] == 3
    assert g.edges["r1.1", "r2.0"]["position"] == 1
    assert nx.is_directed_acyclic_graph(g)
    assert g.graph == {
        "problem_id": "p1",
        "answer": "So the answer is \\boxed{42}.",
        "final_answer": "42",
        "final": "r2.0",
        "effective_ttc": result.effective_ttc,
        "schedule": [4, 2, 1],
        "model": "fake",
        "preset": "low",
        "ground_truth": None,
    }


def test_node_attributes_and_the_failed_call() -> None:
    g = message_graph(scripted())
    ok = g.nodes["r0.3"]
    assert ok["round"] == 0 and ok["index"] == 3
    assert ok["answer"] == "42"  # the conclusion's box, not the one in the thinking
    assert ok["truncated"] is True and ok["finish_reason"] == "length"
    assert ok["failed"] is False and ok["error"] == ""
    assert ok["completion_tokens"] == 13 and ok["prompt_tokens"] == 5
    assert ok["message_chars"] == len("So the answer is \\boxed{42}.")
    assert "correct" not in ok  # no ground truth, no grading
    bad = g.nodes["r0.1"]
    assert bad["failed"] is True and bad["error"] == "HTTP 500: boom"
    assert bad["answer"] == "" and bad["message_chars"] == 0 and bad["finish_reason"] == ""
    assert g.out_degree("r0.1") == 0
    assert [n for n in g.nodes if g.out_degree(n) == 0] == ["r0.1", "r2.0"]
    assert [n for n, final in g.nodes(data="final") if final] == ["r2.0"]
    assert {n: a for n, a in g.nodes(data="answer")} == {
        "r0.0": "42",
        "r0.1": "",
        "r0.2": "41",
        "r0.3": "42",
        "r1.0": "42",
        "r1.1": "7",
        "r2.0": "42",
    }


def test_correctness_with_a_ground_truth() -> None:
    g = message_graph(scripted(), ground_truth={"answer": "42"})
    correct = {n for n, c in g.nodes(data="correct") if c}
    assert correct == {"r0.0", "r0.3", "r1.0", "r2.0"}
    assert g.nodes["r0.1"]["correct"] is False and g.nodes["r0.1"]["score"] == 0.0
    assert g.nodes["r0.2"]["correct"] is False
    assert g.graph["ground_truth"] == "42"
    # A record without a readable ground truth is not graded (rather than all wrong).
    assert "correct" not in message_graph(scripted(), ground_truth={"other": 1}).nodes["r0.0"]


def test_a_given_grader_is_used_and_its_errors_count_as_wrong() -> None:
    seen: list[str] = []

    class Sevens:
        name = "sevens"

        def grade(self, response: str, ground_truth: Any) -> Grade:
            seen.append(response)
            return Grade(1.0 if "{7}" in response else 0.0, True)

    g = message_graph(scripted(), ground_truth="7", grader=Sevens())
    assert {n for n, c in g.nodes(data="correct") if c} == {"r1.1"}
    assert len(seen) == 6  # the failed call is not graded

    class Broken:
        name = "broken"

        def grade(self, response: str, ground_truth: Any) -> Grade:
            raise RuntimeError("grader bug")

    g = message_graph(scripted(), ground_truth="42", grader=Broken())
    assert not any(c for _, c in g.nodes(data="correct"))

    exact = message_graph(scripted(), ground_truth="41", grader=ExactGrader())
    assert {n for n, c in exact.nodes(data="correct") if c} == {"r0.2"}


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        ((3, 1), "references r0.1, which failed"),
        ((0, 9), "references r0.9, which is not in the record"),
        ((0, 0), "references a message twice"),
    ],
)
def test_inconsistent_references_are_rejected(refs: tuple[int, ...], message: str) -> None:
    result = scripted()
    rounds = list(result.rounds)
    rounds[1] = (traj(1, 0, "42", refs), rounds[1][1])
    bad = PaCoReResult(
        answer=result.answer, reasoning=None, rounds=tuple(rounds), schedule=result.schedule
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        message_graph(bad)


async def test_a_real_run_is_its_references() -> None:
    def reply(call: FakeCall) -> FakeReply:
        first_round = "Reference 1:" not in call.last_user
        # Unbatched, explorer i is sent seed 100 + i: fail explorer 1 of round 0 only.
        if first_round and call.seed == 101:
            return FakeReply(content="", error="HTTP 500: boom")
        refs = len(re.findall(r"^Reference \d+:$", call.last_user, flags=re.M))
        return FakeReply(content=f"<think>t</think>\\boxed{{{refs + (call.seed or 0) % 2}}}")

    client = FakeChatClient(reply=reply)
    config = PaCoReConfig(
        rounds=[4, 2], batch_samples=False, shuffle_seed=3, sampling=SamplingParams(seed=100)
    )
    result = await ainvoke_pacore(build_pacore_graph(client, config=config), "Q?", problem_id="q")
    g = message_graph(result, ground_truth="3")
    assert g.number_of_nodes() == 4 + 2 + 1
    assert edge_set(g) == expected_edges(result)
    assert g.number_of_edges() == 2 * 3 + 2  # round 1 reads the 3 messages left, round 2 both
    assert g.nodes["r0.1"]["failed"] and g.out_degree("r0.1") == 0
    assert all(1 not in t.references for t in result.rounds[1])
    assert g.nodes["r0.0"]["answer"] == "0" and g.nodes["r0.2"]["answer"] == "0"
    assert g.nodes["r1.0"]["answer"] == "3" and g.nodes["r1.0"]["correct"] is True
    assert g.nodes["r1.1"]["answer"] == "4" and g.nodes["r1.1"]["correct"] is False


# --------------------------------------------------------------------------- export


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


# --------------------------------------------------------------------------- loading


def write_lines(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


def run_line(record_id: str, result: PaCoReResult, **extra: Any) -> dict[str, Any]:
    """A line shaped like ``pacore run``'s results.jsonl."""
    return {
        "request_id": record_id,
        "final_response": "...",
        "id": record_id,
        **extra,
        **result.to_dict(),
        "problem_id": record_id,
    }


def eval_line(method: str, problem_id: str, sample: int, result: PaCoReResult | None) -> dict:
    """A line shaped like ``pacore eval``'s results.jsonl (``None``: a failed run)."""
    line: dict[str, Any] = {
        "method": method,
        "family": method.split(":")[0],
        "problem_id": problem_id,
        "sample": sample,
        "ground_truth": {"answer": "42"},
        "error": None if result else "RoundFailedError: round 0: all 4 explorer calls failed",
    }
    if result is not None:
        line["result"] = result.to_dict()
    return line


def test_load_result_from_a_run_file(tmp_path: Path) -> None:
    good, other = scripted(), wide((3, 1))
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            {"request_id": "p1", "id": "p1", "error": "ModelCallError: down"},  # retried later
            run_line("p1", good, ground_truth={"answer": "42"}),
            run_line("p2", other),
            {"request_id": "p3", "id": "p3", "error": "RoundFailedError: all calls failed"},
            '{"request_id": "p4", "cut by an interrupt',
        ],
    )
    result, truth = load_result(path, "p1")
    assert result.rounds == good.rounds and result.problem_id == "p1"
    assert truth == {"answer": "42"}
    result2, truth2 = load_result(path, "p2")
    assert result2.schedule == (3, 1) and truth2 is None
    with pytest.raises(ResultLookupError, match=r"run of 'p3' failed: RoundFailedError"):
        load_result(path, "p3")
    with pytest.raises(ResultLookupError, match=r"no run of problem 'zz'.*'p1', 'p2', 'p3'"):
        load_result(path, "zz")
    with pytest.raises(FileNotFoundError, match="no results file"):
        load_result(tmp_path / "missing.jsonl", "p1")


def test_find_run_returns_the_problem_the_line_holds(tmp_path: Path) -> None:
    """The HTML page starts every prompt with the problem: ``messages``, else a question text."""
    convo = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6 x 7?"}]
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            {**run_line("p1", scripted()), "messages": convo},
            {**run_line("p2", scripted()), "question": "What is 2+2?"},
            run_line("p3", scripted()),
        ],
    )
    assert find_run(path, "p1").messages == convo
    assert find_run(path, "p2").messages == [{"role": "user", "content": "What is 2+2?"}]
    assert find_run(path, "p3").messages is None


def test_load_result_from_an_eval_file(tmp_path: Path) -> None:
    low, high = scripted(), wide((32, 4, 1))
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            eval_line("pacore:low", "p1", 0, low),
            eval_line("pacore:high", "p1", 0, high),
            eval_line("pacore:high", "p1", 1, None),
            eval_line("pacore:low", "p2", 0, wide((2, 1))),
        ],
    )
    with pytest.raises(ResultLookupError, match=r"several methods.*pacore:low, pacore:high"):
        load_result(path, "p1")
    result, truth = load_result(path, "p1", method="pacore:high")
    assert result.schedule == (32, 4, 1) and truth == {"answer": "42"}
    result, _ = load_result(path, "p2")  # one method: no need to name it
    assert result.schedule == (2, 1)
    with pytest.raises(ResultLookupError, match=r"sample 1\) failed: RoundFailedError"):
        load_result(path, "p1", method="pacore:high", sample=1)
    with pytest.raises(ResultLookupError, match=r"no sample 5; its samples: 0, 1"):
        load_result(path, "p1", method="pacore:high", sample=5)
    with pytest.raises(ResultLookupError, match=r"no run of method 'majority:4'.*pacore:low"):
        load_result(path, "p1", method="majority:4")
    with pytest.raises(ResultLookupError, match=r"available ids: 'p1', 'p2'"):
        load_result(path, "p9")


def test_load_result_reports_the_failed_sample_it_was_asked_for(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [eval_line("pacore:low", "p1", 1, None)])
    with pytest.raises(ResultLookupError, match=r"'p1' \(pacore:low, sample 1\) failed"):
        load_result(path, "p1", sample=1)


# --------------------------------------------------------------------------- drawing


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.parametrize(
    ("result", "ground_truth"),
    [
        (scripted(), "42"),
        (wide((32, 4, 1)), "3"),
        (wide((1,)), None),
        (wide((64, 1), answers=25), None),  # unlabelled, rare answers share a colour
    ],
    ids=["4-2-1", "32-4-1", "one-node", "64-1"],
)
def test_drawing_writes_a_sane_png(
    tmp_path: Path, result: PaCoReResult, ground_truth: str | None
) -> None:
    g = message_graph(result, ground_truth=ground_truth)
    path = draw_message_graph(g, tmp_path / "out" / "g.png")
    assert path == tmp_path / "out" / "g.png"
    width, height = png_size(path)
    assert 300 <= width <= 4000 and 300 <= height <= 4000
    tallest = max(result.schedule)
    assert height >= min(tallest, 60) * 15  # tall runs get a tall picture


def test_answer_colours_same_answer_same_colour() -> None:
    g = message_graph(wide((64, 1), answers=25))
    colors = answer_colors(g)
    assert set(colors) == {n for _, n in g.nodes(data="answer")}
    assert len(set(list(colors.values())[:10])) == 10  # the ten most common: distinct
    assert len(set(list(colors.values())[10:])) == 1  # the rest: one shared colour
    s = answer_colors(message_graph(scripted()))
    assert list(s) == ["42", "41", "7"]  # by count, then first appearance
    # Green and red mean correct and incorrect: no answer is filled with them.
    assert not {"#2ca02c", "#d62728"} & set(colors.values())


def test_complete_round_gaps_are_bundled_and_partial_ones_are_not() -> None:
    groups = edge_groups(message_graph(wide((32, 4, 1))))
    assert [(grp.round, grp.bundled, len(grp.edges)) for grp in groups] == [
        (1, True, 128),  # every one of 4 read all 32: one bus, not 128 lines
        (2, False, 4),  # 4 -> 1: bundling would not save a line
    ]
    assert len(groups[0].sources) == 32 and len(groups[0].targets) == 4
    # scripted(): r1.0 and r1.1 each read all three successful messages of round 0,
    # and 3 x 2 = 6 single edges are more than 3 + 2 lines through a bus.
    partial = edge_groups(message_graph(scripted()))
    assert [(grp.round, grp.bundled) for grp in partial] == [(1, True), (2, False)]
    # Drop one reference: the gap is no longer complete and every edge is drawn.
    result = scripted()
    rounds = list(result.rounds)
    rounds[1] = (rounds[1][0], traj(1, 1, "7", (2, 3)))
    thinned = PaCoReResult(
        answer=result.answer, reasoning=None, rounds=tuple(rounds), schedule=(4, 2, 1)
    )
    assert [grp.bundled for grp in edge_groups(message_graph(thinned))] == [False, False]


def _legend_texts(fig: Any) -> list[str]:
    legend = fig.axes[0].get_legend()
    return [text.get_text() for text in legend.get_texts()]


def test_the_picture_of_a_high_run_is_not_a_mesh() -> None:
    from matplotlib.collections import LineCollection

    fig = message_graph_figure(message_graph(wide((32, 4, 1)), ground_truth="3"))
    lines = sum(
        len(c.get_segments()) for c in fig.axes[0].collections if isinstance(c, LineCollection)
    )
    # 32 stubs into the bus, the bar, 4 lines out of it, then 4 plain edges.
    assert lines == 32 + 1 + 4 + 4
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "each of 4 read all 32 messages" in texts


def test_failed_other_and_truncated_are_told_apart() -> None:
    assert FAILED_COLOR.lower() != OTHER_COLOR.lower()
    # 64 answers over 25 values: rare ones are "other answers"; make two calls fail.
    result = wide((64, 1), answers=25)
    first = list(result.rounds[0])
    first[5] = traj(0, 5, None)
    first[9] = traj(0, 9, None)
    first[11] = traj(0, 11, "3", finish_reason="length")
    rounds = (tuple(first), (traj(1, 0, "3", tuple(i for i in range(64) if i not in (5, 9))),))
    run = PaCoReResult(answer="", reasoning=None, rounds=rounds, schedule=(64, 1))
    fig = message_graph_figure(message_graph(run))
    texts = _legend_texts(fig)
    assert "failed call (2)" in texts
    assert "truncated at max_tokens (1)" in texts
    assert any(re.fullmatch(r"\d+ other answers \(\d+\)", t) for t in texts)
    from matplotlib.colors import to_hex

    faces = {
        to_hex(face)
        for c in fig.axes[0].collections
        for face in getattr(c, "get_facecolors", lambda: [])()
    }
    assert FAILED_COLOR.lower() in faces and OTHER_COLOR.lower() in faces
    # No truncation in the run, no ring in the legend.
    assert not any(
        "truncated" in t for t in _legend_texts(message_graph_figure(message_graph(wide((4, 1)))))
    )


def test_the_saved_canvas_is_cropped_to_the_drawing(tmp_path: Path) -> None:
    g = message_graph(wide((32, 4, 1)))
    path = draw_message_graph(g, tmp_path / "g.png")
    fig = message_graph_figure(g)
    full_w, full_h = (round(v * fig.dpi) for v in fig.get_size_inches())
    width, height = png_size(path)
    # The legend sits beside the plot, not in a reserved blank column.
    assert width <= full_w * 1.6 and height <= full_h


def test_drawing_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'pacore-graph[eval]'")):
        draw_message_graph(message_graph(scripted()), tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()


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
    assert main(["graph", str(out), "--id", "nope", "--out", str(png)]) == 1
    assert main(["graph", str(tmp_path / "missing.jsonl"), "--id", "p1", "--out", str(png)]) == 2
