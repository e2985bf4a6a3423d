"""Drawing a message graph: rounds as columns, answers as colours, correctness as outlines.

What a reader needs from the picture is how answers travelled, so every mark
says something:

- a node's fill is its extracted answer (the ten most common get a colour,
  rarer ones share a light grey), a failed call is a black disc with a white
  cross (never grey: grey is "other answers"), a truncated trajectory (cut by
  ``max_tokens``) wears a dotted ring, and a graded node a green/red outline;
- an edge is drawn in the colour of the answer it carried. When every
  trajectory of a round read *every* message of the round before (``high``:
  4 x 32 = 128 edges), single edges say nothing, so they are bundled through
  one bus bar per round gap, labelled with what it stands for (:func:`edge_groups`);
- the canvas is cropped to what is drawn.

matplotlib is an optional dependency (the ``eval`` extra) and is imported only
when a graph is drawn, on its own Agg canvas (:func:`~pacore_graph.eval.figure.agg_figure`),
never through ``pyplot``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from pacore_graph.eval.figure import agg_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "FAILED_COLOR",
    "OTHER_COLOR",
    "EdgeGroup",
    "answer_colors",
    "draw_message_graph",
    "edge_groups",
    "message_graph_figure",
]

_LEGEND_ANSWERS = 10
_PALETTE = (
    # tab10 without its green, red and grey, which mean correct, incorrect and
    # "other answers" here, then the light tints of the first three: one per
    # legend entry.
    "#1f77b4",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#c5b0d5",
)
_LEGEND_CHARS = 30
_LABEL_MAX_NODES = 60
_BUS_LABEL_PT = 7
#: Points between the top of a node (its ring, when truncated) and the bus label above it.
_LABEL_GAP_PT = 3.0
#: A truncated node's dotted ring, as a multiple of its disc's area.
_RING_AREA = 2.1
_NO_ANSWER_COLOR = "#ffffff"
OTHER_COLOR = "#bdbdbd"
"""Fill of answers outside the legend's ten: light grey, so it reads as "the rest"."""
FAILED_COLOR = "#111111"
"""Fill of a failed call (with a white cross): black, unlike any answer."""
_TRUNCATED_COLOR = "#111111"
_BUS_COLOR = "#737373"
_CORRECT_COLOR = "#1a9850"
_INCORRECT_COLOR = "#d73027"


@dataclass(frozen=True, slots=True)
class EdgeGroup:
    """The edges from one round to the next, and whether they are drawn bundled.

    ``bundled`` means every target read every message of the source round
    (all successful ``sources``), so the edges are drawn as one bus, not one
    line each.
    """

    round: int
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    bundled: bool


def edge_groups(g: nx.DiGraph) -> list[EdgeGroup]:
    """The edges per round gap; a gap is bundled when it is complete and bundling saves lines.

    Complete: every trajectory of round r read every successful message of
    round r-1. Bundling draws ``sources + targets`` lines instead of
    ``sources x targets``, so it is used when that is fewer and there is
    more than one target (4 -> 1 stays four plain edges).
    """
    by_round: dict[int, list[str]] = {}
    for node, attrs in g.nodes(data=True):
        by_round.setdefault(int(attrs["round"]), []).append(node)
    groups: list[EdgeGroup] = []
    for r in sorted(by_round):
        if r == 0:
            continue
        targets = tuple(sorted(by_round[r], key=lambda n: int(g.nodes[n]["index"])))
        edges = tuple((u, v) for v in targets for u in g.predecessors(v))
        if not edges:
            continue
        sources = tuple(
            sorted(
                (n for n in by_round.get(r - 1, []) if not g.nodes[n]["failed"]),
                key=lambda n: int(g.nodes[n]["index"]),
            )
        )
        readers = [v for v in targets if not g.nodes[v]["failed"] or g.in_degree(v)]
        complete = bool(readers) and all(set(g.predecessors(v)) == set(sources) for v in readers)
        bundled = (
            complete
            and len(readers) > 1
            and len(sources) * len(readers) > len(sources) + len(readers)
        )
        groups.append(EdgeGroup(r, sources, targets, edges, bundled))
    return groups


def _positions(g: nx.DiGraph) -> tuple[dict[str, tuple[float, float]], int, int]:
    """Rounds as columns (x = round), each column's nodes spread top-down by index.

    Every column is spread over the same height, so a round of 4 after a
    round of 32 sits evenly beside it instead of bunched in the middle.
    Returns the positions, the number of columns and the tallest column.
    """
    columns: dict[int, list[str]] = {}
    for node, attrs in g.nodes(data=True):
        columns.setdefault(int(attrs["round"]), []).append(node)
    tallest = max((len(c) for c in columns.values()), default=1)
    pos: dict[str, tuple[float, float]] = {}
    for r, nodes in columns.items():
        nodes.sort(key=lambda n: int(g.nodes[n]["index"]))
        for rank, node in enumerate(nodes):
            pos[node] = (float(r), tallest * (1.0 - (rank + 0.5) / len(nodes)))
    n_rounds = max(columns, default=0) + 1
    return pos, n_rounds, tallest


def _short(text: str, limit: int = _LEGEND_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _answer_counts(g: nx.DiGraph) -> Counter[str]:
    """How many successful trajectories gave each answer, most common first.

    Ties keep the order answers first appear in (by round, then index), so the
    colours of a graph do not depend on how it was built.
    """
    order = sorted(g.nodes, key=lambda n: (g.nodes[n]["round"], g.nodes[n]["index"]))
    seen: Counter[str] = Counter(
        g.nodes[n]["answer"] for n in order if not g.nodes[n]["failed"] and g.nodes[n]["answer"]
    )
    return Counter({a: seen[a] for a in sorted(seen, key=lambda a: -seen[a])})


def answer_colors(g: nx.DiGraph) -> dict[str, str]:
    """Fill colour (hex) of each extracted answer in :func:`draw_message_graph`.

    The ten most common answers get a colour each; rarer ones share one dark
    grey, so that every colour in the picture is in its legend.
    """
    ranked = list(_answer_counts(g))
    return {
        a: _PALETTE[i] if i < min(len(_PALETTE), _LEGEND_ANSWERS) else OTHER_COLOR
        for i, a in enumerate(ranked)
    }


def _draw_edges(
    ax: Axes, g: nx.DiGraph, pos: dict[str, tuple[float, float]], gap: float, diameter: float
) -> None:
    """Plain edges in the colour of the answer they carried; complete round gaps as one bus.

    A bus's label sits above the bus, clear of the top node's disc
    (``diameter`` points wide) and of the dotted ring a truncated node wears:
    the bus starts at that node's height, so a label any lower is drawn
    under the node.
    """
    from matplotlib.collections import LineCollection

    colors = answer_colors(g)
    plain: list[tuple[tuple[float, float], tuple[float, float]]] = []
    plain_colors: list[str] = []
    bus_lines: list[tuple[tuple[float, float], tuple[float, float]]] = []
    for group in edge_groups(g):
        if not group.bundled:
            for u, v in group.edges:
                plain.append((pos[u], pos[v]))
                plain_colors.append(colors.get(g.nodes[u]["answer"], _BUS_COLOR))
            continue
        # Sources feed a vertical bar just right of their column; the bar feeds
        # every target. Each line is one source or one target, never a pair.
        bus_x = group.round - 1 + gap
        ys = [pos[n][1] for n in (*group.sources, *group.targets)]
        bus_lines.append(((bus_x, min(ys)), (bus_x, max(ys))))
        readers = {v for _, v in group.edges}
        for u in group.sources:
            plain.append((pos[u], (bus_x, pos[u][1])))
            plain_colors.append(colors.get(g.nodes[u]["answer"], _BUS_COLOR))
        for v in group.targets:
            if v in readers:
                bus_lines.append(((bus_x, pos[v][1]), pos[v]))
        ax.annotate(
            f"each of {len(readers)} read all {len(group.sources)} messages",
            (bus_x, max(ys)),
            xytext=(0, _label_offset(diameter)),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=_BUS_LABEL_PT,
            color="#404040",
            zorder=5,
        )
    if plain:
        alpha = 0.6 if len(plain) <= 60 else 0.4
        ax.add_collection(
            LineCollection(plain, colors=plain_colors, linewidths=1.0, alpha=alpha, zorder=1)
        )
    if bus_lines:
        ax.add_collection(
            LineCollection(bus_lines, colors=_BUS_COLOR, linewidths=2.2, alpha=0.85, zorder=1)
        )


def _label_offset(diameter: float) -> float:
    """Points from a node's centre to a label above it: past its disc and any ring it wears."""
    return diameter * _RING_AREA**0.5 / 2 + _LABEL_GAP_PT


def _draw(ax: Axes, g: nx.DiGraph, fig_height: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    pos, n_rounds, tallest = _positions(g)
    # Marker diameter in points from the vertical room per node, so 32 stacked
    # nodes do not overlap and a lone node is not a giant disc.
    room_pt = max(fig_height - 1.2, 1.0) * 72.0 / tallest
    diameter = min(22.0, max(2.5, 0.62 * room_pt))
    size = diameter**2
    _draw_edges(ax, g, pos, gap=0.28, diameter=diameter)

    colors, counts = answer_colors(g), _answer_counts(g)
    graded = any("correct" in attrs for _, attrs in g.nodes(data=True))
    ok = [n for n in g.nodes if not g.nodes[n]["failed"]]
    failed = [n for n in g.nodes if g.nodes[n]["failed"]]
    truncated = [n for n in ok if g.nodes[n]["truncated"]]
    if ok:
        faces = [colors.get(g.nodes[n]["answer"], _NO_ANSWER_COLOR) for n in ok]
        if graded:
            edges = [_CORRECT_COLOR if g.nodes[n].get("correct") else _INCORRECT_COLOR for n in ok]
            widths = [max(1.5, diameter / 7.0)] * len(ok)
        else:
            edges = ["#333333"] * len(ok)
            widths = [0.7] * len(ok)
        ax.scatter(
            [pos[n][0] for n in ok],
            [pos[n][1] for n in ok],
            s=size,
            c=faces,
            edgecolors=edges,
            linewidths=widths,
            zorder=3,
        )
    if truncated:
        ax.scatter(
            [pos[n][0] for n in truncated],
            [pos[n][1] for n in truncated],
            s=size * _RING_AREA,
            facecolors="none",
            edgecolors=_TRUNCATED_COLOR,
            linewidths=1.3,
            linestyles=(0, (1.2, 1.2)),
            zorder=2,
        )
    if failed:
        xs = [pos[n][0] for n in failed]
        ys = [pos[n][1] for n in failed]
        ax.scatter(xs, ys, s=size, c=FAILED_COLOR, edgecolors=FAILED_COLOR, zorder=3)
        ax.scatter(xs, ys, s=size * 0.45, marker="x", c="#ffffff", linewidths=1.4, zorder=4)

    if g.number_of_nodes() < _LABEL_MAX_NODES:
        fontsize = 7 if tallest <= 16 else 6
        for node, (x, y) in pos.items():
            ax.annotate(
                node,
                (x, y),
                xytext=(-(diameter / 2 + 3), 0),
                textcoords="offset points",
                ha="right",
                va="center",
                fontsize=fontsize,
                color="#262626",
                zorder=5,
                # Edges arrive from the left, where the label is: keep it legible.
                bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.8},
            )

    handles: list[Any] = []
    labels: list[str] = []

    def patch(face: str, label: str) -> None:
        handles.append(Patch(facecolor=face, edgecolor="#333333"))
        labels.append(label)

    def disc(label: str, **style: Any) -> Line2D:
        marker = Line2D([], [], marker="o", linestyle="", **{"markersize": 9, **style})
        handles.append(marker)
        labels.append(label)
        return marker

    ranked = list(counts)
    for answer in ranked[:_LEGEND_ANSWERS]:
        patch(colors[answer], f"{_short(answer)} ({counts[answer]})")
    rest = ranked[_LEGEND_ANSWERS:]
    if rest:
        patch(OTHER_COLOR, f"{len(rest)} other answers ({sum(counts[a] for a in rest)})")
    no_answer = sum(1 for n in ok if not g.nodes[n]["answer"])
    if no_answer:
        patch(_NO_ANSWER_COLOR, f"no answer ({no_answer})")
    if failed:
        back = disc("", markerfacecolor=FAILED_COLOR, markeredgecolor=FAILED_COLOR)
        cross = Line2D([], [], marker="x", linestyle="", markersize=5, color="#ffffff")
        handles[-1] = (back, cross)  # drawn on top of each other, like the nodes
        labels[-1] = f"failed call ({len(failed)})"
    if truncated:
        # An empty scatter as the handle, so the legend ring is dotted like the nodes'.
        handles.append(
            ax.scatter(
                [],
                [],
                s=90,
                facecolors="none",
                edgecolors=_TRUNCATED_COLOR,
                linewidths=1.3,
                linestyles=(0, (1.2, 1.2)),
            )
        )
        labels.append(f"truncated at max_tokens ({len(truncated)})")
    if graded:
        for label, color in (("correct", _CORRECT_COLOR), ("incorrect", _INCORRECT_COLOR)):
            disc(label, markerfacecolor="white", markeredgecolor=color, markeredgewidth=2.5)
    if handles:
        ax.legend(
            handles=handles,
            labels=labels,
            title="extracted answer (count)",
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
            fontsize=8,
            title_fontsize=8,
            frameon=False,
        )

    widths_by_round = Counter(int(g.nodes[n]["round"]) for n in g.nodes)
    ax.set_xticks(range(n_rounds))
    ax.set_xticklabels([f"round {r}\nK={widths_by_round.get(r, 0)}" for r in range(n_rounds)])
    ax.set_xlim(-0.45, n_rounds - 0.6)
    bundled = [group for group in edge_groups(g) if group.bundled]
    top = float(tallest) + (0.1 + 0.04 * tallest if bundled else 0.1)
    if bundled:
        # Room above the highest bus for its label: the label's offset and
        # height in points, turned into data units on this axes' height.
        bus_top = max(pos[n][1] for grp in bundled for n in (*grp.sources, *grp.targets))
        need_pt = _label_offset(diameter) + 1.4 * _BUS_LABEL_PT
        axes_pt = _axes_height_in(fig_height) * 72.0
        top = max(top, bus_top + need_pt * (bus_top + 0.1) / max(axes_pt - need_pt, 1.0))
    ax.set_ylim(-0.1, top)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)


def _default_title(g: nx.DiGraph) -> str:
    schedule = "/".join(str(k) for k in g.graph.get("schedule") or [])
    head = f"{g.graph.get('problem_id') or 'run'}: K={schedule or '?'}"
    ttc = g.graph.get("effective_ttc")
    if isinstance(ttc, int):
        head += f", effective TTC {ttc:,} tokens"
    tail = f"answer: {_short(str(g.graph.get('final_answer') or '(none)'), 40)}"
    truth = g.graph.get("ground_truth")
    if truth:
        tail += f"   ground truth: {_short(str(truth), 40)}"
    return f"{head}\n{tail}"


def message_graph_figure(g: nx.DiGraph, *, title: str | None = None) -> Figure:
    """The drawing as a matplotlib ``Figure`` on its own Agg canvas (what gets saved).

    Raises ``ImportError`` naming the ``eval`` extra when matplotlib is missing.
    """
    _, n_rounds, tallest = _positions(g) if g.number_of_nodes() else ({}, 1, 1)
    height = min(18.0, max(3.4, 0.2 * tallest + 1.6))
    width = 1.0 + 1.6 * n_rounds
    fig = agg_figure(width, height, dpi=110, purpose="drawing the message graph")
    ax = fig.add_subplot(1, 1, 1)
    if g.number_of_nodes():
        _draw(ax, g, height)
    else:
        ax.text(0.5, 0.5, "no trajectories", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()
    ax.set_title(title if title is not None else _default_title(g), fontsize=10)
    fig.subplots_adjust(left=0.6 / width, right=1.0 - 0.1 / width, top=1.0 - 0.7 / height)
    fig.subplots_adjust(bottom=min(0.45, 0.7 / height))
    return fig


def _axes_height_in(fig_height: float) -> float:
    """The plot's height in inches: what :func:`message_graph_figure`'s margins leave."""
    return fig_height * ((1.0 - 0.7 / fig_height) - min(0.45, 0.7 / fig_height))


def draw_message_graph(g: nx.DiGraph, path: Path, *, title: str | None = None) -> Path:
    """Draw the message graph to ``path`` (format from the suffix, PNG by default).

    Rounds are columns from left to right and each round's trajectories are
    stacked by index, so an edge is always a message read by the next round.
    Fill colour is the extracted answer (same answer, same colour; the legend
    lists the most common ones), a thick green/red outline says correct or
    incorrect when the graph was graded, failed calls are black with a white
    cross and truncated trajectories wear a dotted ring. Complete round gaps
    are bundled (see :func:`edge_groups`). Node ids are written beside the
    nodes of graphs under 60 nodes. Positions are computed here, so no
    graphviz is needed; the saved canvas is cropped to what is drawn.

    Raises ``ImportError`` naming the ``eval`` extra when matplotlib is missing.
    """
    fig = message_graph_figure(g, title=title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.12)
    return path
