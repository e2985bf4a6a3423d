"""The message graph as one self-contained HTML page: the run to click through in a browser.

The PNG (:mod:`~pacore_graph.message_graph.draw`) shows how answers travelled
at a glance; this page also lets a reader ask *why*: click a trajectory to
read its prompt (the problem and, in prompt order, the messages it read),
reasoning, content, compacted message, tokens, finish reason and error; hover
an edge to see which reference of which prompt it was.

- rounds are columns; each trajectory is an element of class ``trajectory``
  with ``data-round``, ``data-index`` and ``data-id``, filled with the colour of
  its extracted answer (the same colours as the PNG), black when its call
  failed, with a dotted border when it was truncated and a green or red
  outline when graded;
- each edge (a message read by a later trajectory) is an SVG group of class
  ``edge`` with ``data-source``, ``data-target`` and ``data-position``.

One file, no network at view time: the CSS and the script are inline, the
layout is computed here (no graph library in the browser), and the run's text
travels as JSON in a ``<script type="application/json">`` element that the
page reads with ``JSON.parse`` and writes only through ``textContent``. Every
piece of run text (answers, reasoning, errors, ids) is escaped where it
enters HTML, so a trajectory that wrote ``<script>`` shows it, never runs it.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from pacore_graph.message_graph.draw import FAILED_COLOR, OTHER_COLOR, answer_colors
from pacore_graph.values.records import PaCoReResult

__all__ = ["ViewerLayout", "message_graph_html", "write_message_graph_html"]

_NO_ANSWER_COLOR = "#ffffff"
_CORRECT_COLOR = "#1a9850"
_INCORRECT_COLOR = "#d73027"
_LABEL_CHARS = 18


@dataclass(frozen=True, slots=True)
class ViewerLayout:
    """Sizes of the drawing in CSS pixels: column pitch, node box, row pitch, margins."""

    column: int = 230
    node_width: int = 150
    node_height: int = 30
    row: int = 40
    top: int = 36
    left: int = 16

    def rows(self, tallest: int) -> int:
        """Row pitch for the tallest column: tighter for wide rounds, never below the box."""
        if tallest <= 16:
            return self.row
        return max(self.node_height + 4, self.row - (tallest - 16))


def _short(text: str, limit: int = _LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _script_json(data: Any) -> str:
    """JSON safe inside ``<script>``: no ``</script>``, ``<!--`` or line separators can close it."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content
        )
    return "" if content is None else str(content)


def _positions(
    g: nx.DiGraph, layout: ViewerLayout
) -> tuple[dict[str, tuple[int, int]], int, int, dict[int, int]]:
    """Top-left corner of each node box; canvas width and height; width of each round."""
    columns: dict[int, list[str]] = {}
    for node, attrs in g.nodes(data=True):
        columns.setdefault(int(attrs["round"]), []).append(node)
    tallest = max((len(c) for c in columns.values()), default=1)
    pitch = layout.rows(tallest)
    height = layout.top + tallest * pitch + 8
    pos: dict[str, tuple[int, int]] = {}
    for r, nodes in columns.items():
        nodes.sort(key=lambda n: int(g.nodes[n]["index"]))
        # Every column spread over the same height, as in the PNG.
        step = tallest * pitch / len(nodes)
        for rank, node in enumerate(nodes):
            y = layout.top + int(rank * step + (step - layout.node_height) / 2)
            pos[node] = (layout.left + r * layout.column, y)
    n_rounds = max(columns, default=0) + 1
    width = layout.left * 2 + (n_rounds - 1) * layout.column + layout.node_width
    return pos, width, height, {r: len(c) for r, c in columns.items()}


def _trajectory_data(
    result: PaCoReResult, g: nx.DiGraph, conversation: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """What a click shows, by trajectory id (the page's only copy of the run's text)."""
    by_id = {t.id: t for t in result.trajectories}
    out: dict[str, Any] = {}
    for rnd in result.rounds:
        for t in rnd:
            attrs = g.nodes[t.id]
            refs = [
                {
                    "position": position,
                    "id": f"r{t.round - 1}.{ref}",
                    "message": (by_id.get(f"r{t.round - 1}.{ref}") or t).message or "",
                }
                for position, ref in enumerate(t.references, start=1)
            ]
            out[t.id] = {
                "id": t.id,
                "round": t.round,
                "index": t.index,
                "answer": attrs.get("answer", ""),
                "correct": attrs.get("correct"),
                "final": bool(attrs.get("final")),
                "failed": t.failed,
                "error": t.error or "",
                "finish_reason": t.finish_reason or "",
                "truncated": t.truncated,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
                "tokens_estimated": t.tokens_estimated,
                "latency_s": round(t.latency_s, 4),
                "references": refs,
                "reasoning": t.reasoning or "",
                "content": t.content,
                "message": t.message or "",
            }
    return {
        "problem": [
            {"role": str(m.get("role", "")), "content": _text_of(m.get("content"))}
            for m in (conversation or ())
        ],
        "trajectories": out,
    }


def _node_html(
    node: str, attrs: Mapping[str, Any], x: int, y: int, fill: str, lay: ViewerLayout
) -> str:
    classes = ["trajectory"]
    if attrs["failed"]:
        classes.append("failed")
    if attrs["truncated"]:
        classes.append("truncated")
    if attrs.get("final"):
        classes.append("final")
    if "correct" in attrs:
        classes.append("correct" if attrs["correct"] else "incorrect")
    answer = attrs.get("answer") or ""
    label = "✕ failed" if attrs["failed"] else (_short(answer) if answer else "no answer")
    dark = attrs["failed"] or fill in ("#1f77b4", "#9467bd", "#8c564b")
    style = (
        f"left:{x}px;top:{y}px;width:{lay.node_width}px;height:{lay.node_height}px;"
        f"background:{fill};color:{'#ffffff' if dark else '#111111'}"
    )
    title = f"{node}: {'failed' if attrs['failed'] else answer or 'no answer'}"
    return (
        f'<div class="{" ".join(classes)}" data-id="{html.escape(node)}" '
        f'data-round="{int(attrs["round"])}" data-index="{int(attrs["index"])}" '
        f'tabindex="0" role="button" title="{html.escape(title)}" style="{style}">'
        f'<span class="tid">{html.escape(node)}</span> '
        f'<span class="ans">{html.escape(label)}</span></div>'
    )


def _edge_html(
    u: str,
    v: str,
    position: int,
    readers: int,
    pos: Mapping[str, tuple[int, int]],
    color: str,
    lay: ViewerLayout,
) -> str:
    x1 = pos[u][0] + lay.node_width
    y1 = pos[u][1] + lay.node_height / 2
    x2 = pos[v][0]
    y2 = pos[v][1] + lay.node_height / 2
    bend = (x2 - x1) / 2
    d = f"M{x1},{y1:.1f} C{x1 + bend},{y1:.1f} {x2 - bend},{y2:.1f} {x2},{y2:.1f}"
    tip = f"{u} → {v}: reference {position} of {readers} in {v}'s prompt"
    return (
        f'<g class="edge" data-source="{html.escape(u)}" data-target="{html.escape(v)}" '
        f'data-position="{position}" data-tip="{html.escape(tip)}">'
        f"<title>{html.escape(tip)}</title>"
        f'<path class="hit" d="{d}"/><path class="line" d="{d}" stroke="{color}"/></g>'
    )


def _legend_html(g: nx.DiGraph, colors: Mapping[str, str]) -> str:
    ok = [n for n in g.nodes if not g.nodes[n]["failed"]]
    counts = Counter(g.nodes[n]["answer"] for n in ok if g.nodes[n]["answer"])
    items: list[str] = []
    for answer, color in colors.items():
        if color == OTHER_COLOR:
            continue
        items.append(
            f'<li><span class="swatch" style="background:{color}"></span>'
            f"{html.escape(_short(answer, 30))} ({counts[answer]})</li>"
        )
    rest = [a for a, c in colors.items() if c == OTHER_COLOR]
    if rest:
        items.append(
            f'<li><span class="swatch" style="background:{OTHER_COLOR}"></span>'
            f"{len(rest)} other answers ({sum(counts[a] for a in rest)})</li>"
        )
    no_answer = sum(1 for n in ok if not g.nodes[n]["answer"])
    if no_answer:
        items.append(
            f'<li><span class="swatch" style="background:{_NO_ANSWER_COLOR}"></span>'
            f"no answer ({no_answer})</li>"
        )
    failed = len(g.nodes) - len(ok)
    if failed:
        items.append(
            f'<li><span class="swatch" style="background:{FAILED_COLOR}"></span>'
            f"failed call ({failed})</li>"
        )
    truncated = sum(1 for n in ok if g.nodes[n]["truncated"])
    if truncated:
        items.append(
            '<li><span class="swatch" style="border:2px dotted #111"></span>'
            f"truncated at max_tokens ({truncated})</li>"
        )
    if any("correct" in g.nodes[n] for n in g.nodes):
        for label, color in (("correct", _CORRECT_COLOR), ("incorrect", _INCORRECT_COLOR)):
            items.append(
                f'<li><span class="swatch" style="box-shadow:0 0 0 2px {color}"></span>'
                f"{label} (outline)</li>"
            )
    return "".join(items)


def message_graph_html(
    g: nx.DiGraph,
    result: PaCoReResult,
    *,
    conversation: Sequence[Mapping[str, Any]] | None = None,
    title: str | None = None,
    layout: ViewerLayout | None = None,
) -> str:
    """The page: ``g`` from :func:`~pacore_graph.message_graph.dag.message_graph` of ``result``.

    ``conversation`` (the problem's messages, when the results line has
    them) is shown as the start of every prompt. Returns the HTML text.
    """
    lay = layout or ViewerLayout()
    pos, width, height, widths = _positions(g, lay)
    colors = answer_colors(g)

    def fill(node: str) -> str:
        attrs = g.nodes[node]
        if attrs["failed"]:
            return FAILED_COLOR
        return (
            colors.get(attrs["answer"], _NO_ANSWER_COLOR) if attrs["answer"] else _NO_ANSWER_COLOR
        )

    readers = {v: g.in_degree(v) for v in g.nodes}
    edges = "".join(
        _edge_html(
            u,
            v,
            int(data["position"]),
            readers[v],
            pos,
            colors.get(g.nodes[u]["answer"], "#737373"),
            lay,
        )
        for u, v, data in sorted(g.edges(data=True), key=lambda e: (e[1], int(e[2]["position"])))
    )
    nodes = "".join(
        _node_html(n, g.nodes[n], *pos[n], fill(n), lay)
        for n in sorted(g.nodes, key=lambda n: (g.nodes[n]["round"], g.nodes[n]["index"]))
    )
    headers = "".join(
        f'<div class="round-head" style="left:{lay.left + r * lay.column}px;'
        f'width:{lay.node_width}px">round {r} · K={k}</div>'
        for r, k in sorted(widths.items())
    )
    schedule = "/".join(str(k) for k in g.graph.get("schedule") or [])
    heading = title or f"{g.graph.get('problem_id') or 'run'}: K={schedule or '?'}"
    facts = [f"effective TTC {int(g.graph.get('effective_ttc') or 0):,} tokens"]
    if g.graph.get("model"):
        facts.append(f"model {g.graph['model']}")
    facts.append(f"answer: {_short(str(g.graph.get('final_answer') or '(none)'), 60)}")
    if g.graph.get("ground_truth"):
        facts.append(f"ground truth: {_short(str(g.graph['ground_truth']), 60)}")
    data = _trajectory_data(result, g, conversation)
    return _PAGE.format(
        title=html.escape(heading),
        facts=html.escape(" · ".join(facts)),
        legend=_legend_html(g, colors),
        width=width,
        height=height,
        headers=headers,
        edges=edges,
        nodes=nodes,
        data=_script_json(data),
        css=_CSS.replace("{correct}", _CORRECT_COLOR).replace("{incorrect}", _INCORRECT_COLOR),
        script=_SCRIPT,
    )


def write_message_graph_html(
    g: nx.DiGraph,
    result: PaCoReResult,
    path: Path,
    *,
    conversation: Sequence[Mapping[str, Any]] | None = None,
    title: str | None = None,
) -> Path:
    """Write :func:`message_graph_html` to ``path`` (UTF-8); return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        message_graph_html(g, result, conversation=conversation, title=title), encoding="utf-8"
    )
    return path


_CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 13px/1.4 "DejaVu Sans", "Liberation Sans", Arial, sans-serif;
       color: #111; background: #fafafa; display: flex; height: 100vh; }
#graph { flex: 1 1 auto; overflow: auto; padding: 12px; }
#details { flex: 0 0 420px; overflow: auto; border-left: 1px solid #ddd; background: #fff;
           padding: 12px 16px; }
h1 { font-size: 16px; margin: 0 0 4px; }
.facts { color: #444; margin: 0 0 8px; }
#legend { list-style: none; padding: 0; margin: 0 0 10px; display: flex; flex-wrap: wrap;
          gap: 4px 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #333;
          margin-right: 5px; vertical-align: -2px; }
#canvas { position: relative; }
#edges { position: absolute; left: 0; top: 0; overflow: visible; }
.edge .line { fill: none; stroke-width: 1.2; opacity: 0.55; pointer-events: none; }
.edge .hit { fill: none; stroke: transparent; stroke-width: 7; pointer-events: stroke;
             cursor: help; }
.edge:hover .line, .edge.lit .line { stroke-width: 2.5; opacity: 1; }
.round-head { position: absolute; top: 4px; text-align: center; color: #444; font-weight: bold; }
.trajectory { position: absolute; border: 1px solid #333; border-radius: 6px; padding: 0 6px;
              display: flex; align-items: center; gap: 6px; overflow: hidden; white-space: nowrap;
              cursor: pointer; font-size: 12px; }
.trajectory .tid { font-weight: bold; flex: none; }
.trajectory .ans { overflow: hidden; text-overflow: ellipsis; }
.trajectory.truncated { border: 2px dotted #111; }
.trajectory.correct { box-shadow: 0 0 0 3px {correct}; }
.trajectory.incorrect { box-shadow: 0 0 0 3px {incorrect}; }
.trajectory.final { font-style: italic; }
.trajectory.selected { outline: 3px solid #000; outline-offset: 2px; }
#tip { position: fixed; display: none; background: #222; color: #fff; padding: 3px 7px;
       border-radius: 4px; font-size: 12px; pointer-events: none; z-index: 10; }
#details h2 { font-size: 15px; margin: 0 0 6px; }
#details dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 0; }
#details dt { color: #555; }
#details dd { margin: 0; }
#details h3 { font-size: 13px; margin: 12px 0 4px; }
#details pre { white-space: pre-wrap; word-break: break-word; background: #f4f4f4; margin: 0;
               padding: 6px 8px; border-radius: 4px; max-height: 320px; overflow: auto;
               font: 12px/1.35 "DejaVu Sans Mono", monospace; }
#details .error { color: #b00020; }
.hint { color: #666; }
"""

_SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("pacore-data").textContent);
  var details = document.getElementById("details");
  var tip = document.getElementById("tip");

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (cls) { node.className = cls; }
    return node;
  }
  function section(title, text) {
    details.appendChild(el("h3", title));
    details.appendChild(el("pre", text === "" ? "(empty)" : text));
  }
  function promptText(t) {
    var parts = data.problem.map(function (m) { return m.role + ": " + m.content; });
    if (!parts.length) { parts.push("(the problem is not in the results line)"); }
    t.references.forEach(function (ref) {
      parts.push("Reference " + ref.position + " (" + ref.id + "):\\n" + ref.message);
    });
    return parts.join("\\n\\n");
  }
  function show(id) {
    var t = data.trajectories[id];
    if (!t) { return; }
    document.querySelectorAll(".trajectory.selected").forEach(function (n) {
      n.classList.remove("selected");
    });
    document.querySelectorAll(".edge.lit").forEach(function (n) { n.classList.remove("lit"); });
    var node = document.querySelector('.trajectory[data-id="' + CSS.escape(id) + '"]');
    if (node) { node.classList.add("selected"); }
    document.querySelectorAll('.edge[data-target="' + CSS.escape(id) + '"]').forEach(
      function (e) { e.classList.add("lit"); });
    details.textContent = "";
    details.dataset.id = id;
    details.appendChild(el("h2", t.id + (t.final ? " (gave the answer)" : "")));
    var dl = el("dl");
    function row(k, v, cls) { dl.appendChild(el("dt", k)); dl.appendChild(el("dd", v, cls)); }
    row("round, index", t.round + ", " + t.index);
    row("answer", t.failed ? "(failed call)" : (t.answer || "(none extracted)"));
    if (t.correct !== null && t.correct !== undefined) { row("correct", t.correct ? "yes" : "no"); }
    row("tokens", t.prompt_tokens + " prompt, " + t.completion_tokens + " completion" +
        (t.tokens_estimated ? " (estimated)" : ""));
    row("finish reason", t.finish_reason || "(none)");
    row("latency", t.latency_s + " s");
    if (t.failed) { row("error", t.error, "error"); }
    details.appendChild(dl);
    section("Prompt (the problem" + (t.references.length ?
      ", then the " + t.references.length + " messages it read, in prompt order)" : ")"),
      promptText(t));
    section("Reasoning", t.reasoning);
    section("Content", t.content);
    section("Message (compacted, passed to the next round)", t.message);
  }
  document.querySelectorAll(".trajectory").forEach(function (node) {
    node.addEventListener("click", function () { show(node.dataset.id); });
    node.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); show(node.dataset.id); }
    });
  });
  document.querySelectorAll(".edge").forEach(function (edge) {
    edge.addEventListener("mousemove", function (ev) {
      tip.textContent = edge.dataset.tip;
      tip.style.display = "block";
      tip.style.left = (ev.clientX + 12) + "px";
      tip.style.top = (ev.clientY + 12) + "px";
    });
    edge.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  });
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<main id="graph">
<h1>{title}</h1>
<p class="facts">{facts}</p>
<ul id="legend">{legend}</ul>
<div id="canvas" style="width:{width}px;height:{height}px">
{headers}
<svg id="edges" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">{edges}</svg>
{nodes}
</div>
</main>
<aside id="details"><p class="hint">Click a trajectory to read it; hover an edge to see
which reference it was.</p></aside>
<div id="tip" role="tooltip"></div>
<script type="application/json" id="pacore-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""
