"""message_graph/draw: the PNG of a run's message graph."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from message_graph_support import (
    png_size,
    scripted,
    traj,
    wide,
)

from pacore_graph.message_graph import (
    FAILED_COLOR,
    OTHER_COLOR,
    answer_colors,
    draw_message_graph,
    edge_groups,
    message_graph,
    message_graph_figure,
)
from pacore_graph.values.records import PaCoReResult


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


def _truncated_top() -> PaCoReResult:
    """4/2/1 where the top node of round 0 was cut by max_tokens (it wears the wider ring)."""
    run = wide((4, 2, 1))
    first = (traj(0, 0, "0", finish_reason="length"), *run.rounds[0][1:])
    return PaCoReResult(
        answer=run.answer, reasoning=None, rounds=(first, *run.rounds[1:]), schedule=(4, 2, 1)
    )


@pytest.mark.parametrize(
    "result",
    [wide((4, 2, 1)), wide((3, 2)), wide((16, 4, 1)), wide((32, 4, 1)), _truncated_top()],
    ids=["4-2-1", "3-2", "16-4-1", "32-4-1", "4-2-1-truncated-top"],
)
def test_the_bus_label_is_drawn_clear_of_every_node(result: PaCoReResult) -> None:
    """The round gap's label ("each of 2 read all 4 messages") sits above the top node.

    It used to be 4 points above the bus's top, which is the top node's
    centre: with a few large nodes (4/2/1) the disc covered it. Checked on the
    rendered figure, in display coordinates: the label's box against every
    node's disc (its centre and its radius from the scatter's marker size),
    and inside the figure, below the title.
    """
    import math

    from matplotlib.collections import PathCollection

    fig = message_graph_figure(message_graph(result))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text().startswith("each of ")]
    assert labels, "a complete round gap is bundled and labelled"
    px_per_pt = fig.dpi / 72.0
    discs = []  # every disc and ring drawn, in pixels
    for coll in ax.collections:
        if not isinstance(coll, PathCollection) or not len(coll.get_offsets()):
            continue
        radius = math.sqrt(float(coll.get_sizes()[0])) / 2 * px_per_pt
        for x, y in ax.transData.transform(coll.get_offsets()):
            discs.append((x, y, radius))
    assert len(discs) >= sum(result.schedule)
    title = ax.title.get_window_extent(renderer)
    figure = fig.bbox
    for label in labels:
        box = label.get_window_extent(renderer)
        for x, y, r in discs:
            # Nearest point of the box to the disc's centre is farther than its radius.
            nx_ = min(max(x, box.x0), box.x1)
            ny_ = min(max(y, box.y0), box.y1)
            assert math.hypot(x - nx_, y - ny_) >= r, (
                f"{label.get_text()!r} at {box} overlaps a node at ({x:.0f}, {y:.0f}) r={r:.0f}"
            )
        assert figure.x0 <= box.x0 and box.x1 <= figure.x1
        assert box.y1 <= title.y0, "the label runs into the title"
