"""The message graph of a run: which trajectories' messages fed which later trajectory.

PaCoRe's rounds talk only through compacted messages: trajectory ``r{r}.{i}``
sees the messages of round ``r-1`` that its prompt held, and nothing else.
When a run goes wrong (the final answer is a minority view, a correct early
answer is lost, a failed call silently thins a round) the question is how
answers travelled, so every :class:`~pacore_graph.records.PaCoReResult` can
be turned into a ``networkx.DiGraph``:

- **nodes** are trajectories, named by :attr:`~pacore_graph.records.Trajectory.id`
  (``r0.3``), with their round, index, tokens, finish reason, failure, the
  answer extracted from their content and, when a ground truth is known,
  whether that answer is correct;
- **edges** go from a message to every trajectory whose prompt held it, with
  the message's 1-based ``position`` in that prompt (the records'
  ``references``, in prompt order). Failed calls left no message, so their
  nodes have no outgoing edges; a record that says otherwise is rejected.

The graph exports to node-link JSON and to GraphML (for Gephi, yEd, Cytoscape)
and draws to a PNG with rounds as columns, nodes coloured by extracted answer
and outlined green/red by correctness. :func:`load_result` finds a run in the
``results.jsonl`` of ``pacore run`` or ``pacore eval``, and
:func:`graph_command` is what ``pacore graph`` does.

matplotlib is an optional dependency (the ``eval`` extra) and is imported only
when a graph is drawn, on its own Agg canvas, never through ``pyplot``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from pacore_graph.aggregation import extract_final_answer
from pacore_graph.errors import PaCoReError
from pacore_graph.records import PaCoReResult, trajectory_id

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from pacore_graph.eval.graders import Grader

__all__ = [
    "EDGES_KEY",
    "ResultLookupError",
    "answer_colors",
    "draw_message_graph",
    "from_json",
    "graph_command",
    "load_result",
    "message_graph",
    "to_json",
    "write_graphml",
    "write_json",
]

EDGES_KEY = "edges"
"""Key of the edge list in :func:`to_json` output. networkx's default changed
from ``"links"`` to ``"edges"`` (3.4 warned, 3.6 switched), so it is always
passed explicitly: files written with any networkx version read the same."""

_INSTALL_HINT = "pip install 'pacore-graph[eval]'"
_LEGEND_ANSWERS = 10
_PALETTE = (
    # tab10 without its green, red and grey, which mean correct, incorrect and
    # failed here, then the light tints of the first three: one per legend entry.
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
_NO_ANSWER_COLOR = "#ffffff"
_OTHER_COLOR = "#525252"
_FAILED_COLOR = "#d9d9d9"
_CORRECT_COLOR = "#1a9850"
_INCORRECT_COLOR = "#d73027"


class ResultLookupError(PaCoReError, LookupError):
    """The requested run is not in the results file, is ambiguous, or failed."""


# --------------------------------------------------------------------------- building


def _grade(grader: Grader, content: str, ground_truth: Any) -> float:
    """Score of one trajectory; a grader that breaks its never-raise promise scores 0."""
    try:
        return float(grader.grade(content, ground_truth).score)
    except Exception:
        return 0.0


def message_graph(
    result: PaCoReResult, *, ground_truth: Any = None, grader: Grader | None = None
) -> nx.DiGraph:
    """The run's message-passing DAG: trajectories as nodes, consumed messages as edges.

    Node attributes: ``round``, ``index``, ``completion_tokens``,
    ``prompt_tokens``, ``latency_s``, ``finish_reason`` (``""`` when the
    server gave none), ``failed``, ``error`` (``""`` unless failed),
    ``truncated``, ``answer`` (:func:`~pacore_graph.aggregation.extract_final_answer`
    of the content, ``""`` when there is none or the call failed),
    ``message_chars`` and ``final`` (this trajectory gave the run's answer).
    With a ground truth (one :func:`~pacore_graph.eval.graders.ground_truth_answer`
    can read) every node also gets ``score`` and ``correct`` (full score), graded
    by ``grader`` (default: the math grader); failed calls are never correct.

    Edge ``u -> v`` with ``position`` p: ``u``'s message was the p-th
    reference in ``v``'s prompt. Graph attributes: ``problem_id``, ``answer``,
    ``final_answer`` (extracted), ``final`` (node id), ``effective_ttc``,
    ``schedule`` (a list), ``model``, ``preset`` and ``ground_truth``.

    Raises ``ValueError`` for a record whose references name a trajectory that
    does not exist or that failed (it had no message to pass), or name one
    twice: such a record was not produced by a run, and a graph of it would
    show message passing that never happened.
    """
    from pacore_graph.eval.graders import auto_grader, ground_truth_answer

    expected = ground_truth_answer(ground_truth)
    if expected is not None and grader is None:
        grader = auto_grader(None)
    try:
        final_id: str | None = result.final.id
    except (IndexError, StopIteration):  # a record with no rounds
        final_id = None
    g = nx.DiGraph(
        problem_id=result.problem_id,
        answer=result.answer,
        final_answer=extract_final_answer(result.answer) or "",
        final=final_id,
        effective_ttc=result.effective_ttc,
        schedule=list(result.schedule),
        model=result.model,
        preset=result.preset,
        ground_truth=expected,
    )
    for rnd in result.rounds:
        for t in rnd:
            answer = "" if t.failed else (extract_final_answer(t.content) or "")
            attrs: dict[str, Any] = {
                "round": t.round,
                "index": t.index,
                "completion_tokens": t.completion_tokens,
                "prompt_tokens": t.prompt_tokens,
                "latency_s": t.latency_s,
                "finish_reason": t.finish_reason or "",
                "failed": t.failed,
                "error": t.error or "",
                "truncated": t.truncated,
                "answer": answer,
                "message_chars": len(t.message or ""),
                "final": t.id == final_id,
            }
            if expected is not None and grader is not None:
                score = 0.0 if t.failed else _grade(grader, t.content, ground_truth)
                attrs["score"] = score
                attrs["correct"] = score >= 1.0
            if t.id in g:
                raise ValueError(f"the record has two trajectories named {t.id}")
            g.add_node(t.id, **attrs)
    for rnd in result.rounds:
        for t in rnd:
            if t.references and t.round == 0:
                raise ValueError(f"{t.id} is in the first round but has references")
            if len(set(t.references)) != len(t.references):
                raise ValueError(f"{t.id} references a message twice: {list(t.references)}")
            for position, ref in enumerate(t.references, start=1):
                source = trajectory_id(t.round - 1, ref)
                if source not in g:
                    raise ValueError(f"{t.id} references {source}, which is not in the record")
                if g.nodes[source]["failed"]:
                    raise ValueError(
                        f"{t.id} references {source}, which failed and so had no message"
                    )
                g.add_edge(source, t.id, position=position)
    return g


# --------------------------------------------------------------------------- export


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


# --------------------------------------------------------------------------- loading


def _read_lines(path: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for text in fh:
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except ValueError:
                continue  # a line cut by an interrupted run
            if isinstance(data, dict):
                lines.append(data)
    return lines


def _few(ids: list[str], limit: int = 8) -> str:
    unique = list(dict.fromkeys(ids))
    shown = ", ".join(repr(i) for i in unique[:limit])
    more = f" and {len(unique) - limit} more" if len(unique) > limit else ""
    return (shown + more) if unique else "none"


def _is_eval_line(line: Mapping[str, Any]) -> bool:
    return "method" in line and "sample" in line


def _run_line_ids(line: Mapping[str, Any]) -> set[str]:
    return {str(line[k]) for k in ("request_id", "id", "problem_id") if line.get(k) is not None}


def _pick(
    lines: list[dict[str, Any]], what: str, rounds_of: Any
) -> tuple[PaCoReResult, dict[str, Any]]:
    """The last successful line of ``lines`` (a re-run appends after a failure)."""
    good = [line for line in lines if not line.get("error")]
    if not good:
        raise ResultLookupError(f"the run of {what} failed: {lines[-1]['error']}")
    line = good[-1]
    data = rounds_of(line)
    if not isinstance(data, Mapping) or "rounds" not in data:
        raise ResultLookupError(f"the line of {what} has no 'rounds' record to draw")
    return PaCoReResult.from_dict(data), line


def load_result(
    path: Path, problem_id: str, *, method: str | None = None, sample: int = 0
) -> tuple[PaCoReResult, Any]:
    """Find one run in a results file; return its result and its ground truth (or None).

    Reads both shapes: ``pacore run`` output (the problem is matched by
    ``request_id``, ``id`` or ``problem_id``) and ``pacore eval`` output
    (matched by ``problem_id`` and ``sample``, and by ``method`` when given;
    ``method`` is required when the problem was run by several methods).
    When a problem has several lines (a failed run retried), the last
    successful one is used.

    Raises ``FileNotFoundError`` when the file is missing and
    :class:`ResultLookupError` (naming what is available) when the run is not
    there, is ambiguous, or failed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}")
    problem_id = str(problem_id)
    lines = _read_lines(path)
    if not lines:
        raise ResultLookupError(f"{path} holds no result lines")
    runs = [line for line in lines if not _is_eval_line(line)]
    evals = [line for line in lines if _is_eval_line(line)]

    matches = [line for line in runs if problem_id in _run_line_ids(line)]
    if matches:
        result, line = _pick(matches, repr(problem_id), lambda line: line)
        if result.problem_id is None:
            result = dataclasses.replace(result, problem_id=problem_id)
        return result, line.get("ground_truth")

    for_problem = [line for line in evals if str(line.get("problem_id")) == problem_id]
    if not for_problem:
        available = [str(line.get("request_id", line.get("id"))) for line in runs]
        available += [str(line.get("problem_id")) for line in evals]
        raise ResultLookupError(
            f"no run of problem {problem_id!r} in {path}; available ids: {_few(available)}"
        )
    methods = list(dict.fromkeys(str(line["method"]) for line in for_problem))
    if method is not None:
        if method not in methods:
            raise ResultLookupError(
                f"problem {problem_id!r} has no run of method {method!r} in {path}; "
                f"its methods: {', '.join(methods)}"
            )
        for_problem = [line for line in for_problem if line["method"] == method]
    elif len(methods) > 1:
        raise ResultLookupError(
            f"problem {problem_id!r} was run by several methods in {path}: "
            f"{', '.join(methods)}; choose one with method=..."
        )
    chosen = [line for line in for_problem if int(line.get("sample", 0)) == sample]
    if not chosen:
        samples = sorted({int(line.get("sample", 0)) for line in for_problem})
        raise ResultLookupError(
            f"problem {problem_id!r} ({for_problem[0]['method']}) has no sample {sample}; "
            f"its samples: {', '.join(map(str, samples))}"
        )
    what = f"{problem_id!r} ({chosen[0]['method']}, sample {sample})"
    result, line = _pick(chosen, what, lambda line: line.get("result"))
    if result.problem_id is None:
        result = dataclasses.replace(result, problem_id=problem_id)
    return result, line.get("ground_truth")


# --------------------------------------------------------------------------- drawing


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
        a: _PALETTE[i] if i < min(len(_PALETTE), _LEGEND_ANSWERS) else _OTHER_COLOR
        for i, a in enumerate(ranked)
    }


def _draw(ax: Axes, g: nx.DiGraph, fig_height: float) -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    pos, n_rounds, tallest = _positions(g)
    # Marker diameter in points from the vertical room per node, so 32 stacked
    # nodes do not overlap and a lone node is not a giant disc.
    room_pt = max(fig_height - 1.6, 1.0) * 72.0 / tallest
    diameter = min(26.0, max(2.5, 0.62 * room_pt))
    size = diameter**2

    segments = [(pos[u], pos[v]) for u, v in g.edges]
    if segments:
        alpha = 0.35 if len(segments) <= 60 else 0.18
        ax.add_collection(
            LineCollection(segments, colors="#4d4d4d", linewidths=0.8, alpha=alpha, zorder=1)
        )

    colors, counts = answer_colors(g), _answer_counts(g)
    graded = any("correct" in attrs for _, attrs in g.nodes(data=True))
    ok = [n for n in g.nodes if not g.nodes[n]["failed"]]
    failed = [n for n in g.nodes if g.nodes[n]["failed"]]
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
    if failed:
        xs = [pos[n][0] for n in failed]
        ys = [pos[n][1] for n in failed]
        ax.scatter(xs, ys, s=size, c=_FAILED_COLOR, edgecolors="#7f7f7f", linewidths=0.7, zorder=3)
        ax.scatter(xs, ys, s=size * 0.45, marker="x", c="#404040", linewidths=1.2, zorder=4)

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
            )

    handles: list[Any] = []
    labels: list[str] = []

    def patch(face: str, label: str) -> None:
        handles.append(Patch(facecolor=face, edgecolor="#333333"))
        labels.append(label)

    ranked = list(counts)
    for answer in ranked[:_LEGEND_ANSWERS]:
        patch(colors[answer], f"{_short(answer)} ({counts[answer]})")
    rest = ranked[_LEGEND_ANSWERS:]
    if rest:
        patch(_OTHER_COLOR, f"{len(rest)} other answers ({sum(counts[a] for a in rest)})")
    no_answer = sum(1 for n in ok if not g.nodes[n]["answer"])
    if no_answer:
        patch(_NO_ANSWER_COLOR, f"no answer ({no_answer})")
    if failed:
        disc = Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=9,
            markerfacecolor=_FAILED_COLOR,
            markeredgecolor="#7f7f7f",
        )
        cross = Line2D([], [], marker="x", linestyle="", markersize=6, color="#404040")
        handles.append((disc, cross))  # drawn on top of each other, like the nodes
        labels.append(f"failed call ({len(failed)})")
    if graded:
        for label, color in (("correct", _CORRECT_COLOR), ("incorrect", _INCORRECT_COLOR)):
            handles.append(
                Line2D(
                    [],
                    [],
                    marker="o",
                    linestyle="",
                    markersize=9,
                    markerfacecolor="white",
                    markeredgecolor=color,
                    markeredgewidth=2.5,
                )
            )
            labels.append(label)
    if handles:
        ax.legend(
            handles=handles,
            labels=labels,
            title="extracted answer (count)",
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=8,
            title_fontsize=8,
            frameon=False,
        )

    widths_by_round = Counter(int(g.nodes[n]["round"]) for n in g.nodes)
    ax.set_xticks(range(n_rounds))
    ax.set_xticklabels([f"round {r}\nK={widths_by_round.get(r, 0)}" for r in range(n_rounds)])
    ax.set_xlim(-0.75, n_rounds - 0.5)
    ax.set_ylim(0.0, float(tallest))
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


def draw_message_graph(g: nx.DiGraph, path: Path, *, title: str | None = None) -> Path:
    """Draw the message graph to ``path`` (format from the suffix, PNG by default).

    Rounds are columns from left to right and each round's trajectories are
    stacked by index, so an edge is always a message read by the next round.
    Fill colour is the extracted answer (same answer, same colour; the legend
    lists the most common ones), a thick green/red outline says correct or
    incorrect when the graph was graded, and failed calls are grey with a
    cross. Node ids are written beside the nodes of graphs under 60 nodes.
    Positions are computed here, so no graphviz is needed.

    Raises ``ImportError`` naming the ``eval`` extra when matplotlib is missing.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            f"drawing the message graph needs matplotlib, which is not installed: {_INSTALL_HINT}"
        ) from exc

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _, n_rounds, tallest = _positions(g) if g.number_of_nodes() else ({}, 1, 1)
    height = min(18.0, max(3.6, 0.3 * tallest + 1.8))
    width = 3.4 + 1.9 * n_rounds + 1.0
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    if g.number_of_nodes():
        _draw(ax, g, height)
    else:
        ax.text(0.5, 0.5, "no trajectories", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()
    ax.set_title(title if title is not None else _default_title(g), fontsize=10)
    # Reserve the legend's column on the right; the rest adapts to the figure.
    fig.subplots_adjust(left=0.9 / width, right=1.0 - 3.0 / width, top=1.0 - 0.75 / height)
    fig.subplots_adjust(bottom=min(0.45, 0.75 / height))
    fig.savefig(path)
    return path


# --------------------------------------------------------------------------- command


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
