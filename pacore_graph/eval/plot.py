"""The test-time-scaling plot: accuracy against effective TTC, like PaCoRe's Figure 1.

PaCoRe's claim is a curve, not a number: accuracy should keep rising with
effective test-time compute, above what one long chain or majority voting
reaches for the same tokens. So the picture puts every method at its mean
effective TTC per run (log x, since presets differ by multiples) and its
accuracy, and connects the methods of one family (``pacore:low`` ->
``pacore:medium`` -> ``pacore:high``; ``majority:4`` -> ``majority:16``), one
line each, so the families' curves can be compared at matched compute. A
family with one method is a point, not a curve: it is drawn, and listed in the
legend, as a marker with its error bar and no line, so the legend promises
only lines that are there.

matplotlib is an optional dependency (the ``eval`` extra) and is imported only
when a plot is drawn, on its own Agg canvas (:mod:`pacore_graph.eval.figure`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pacore_graph.eval.figure import agg_figure
from pacore_graph.eval.report import MethodStats
from pacore_graph.runs.private_files import FILE_MODE, private_dir

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["MIN_PLOT_TTC", "plot_scaling", "scaling_figure"]

MIN_PLOT_TTC = 1.0
"""Where a method with zero effective TTC (every run failed before a token) is
drawn: a log axis has no 0, and dropping the point would hide the failure."""

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _draw(ax: Axes, stats: Mapping[str, MethodStats]) -> None:
    every_x = [max(s.mean_ttc, MIN_PLOT_TTC) for s in stats.values()]
    # Labels of points drawn at the same spot (e.g. every method failed: TTC 0,
    # accuracy 0) are stacked upwards instead of printed over each other.
    labels_at: dict[tuple[float, float], int] = {}
    families: dict[str, list[MethodStats]] = {}
    for s in stats.values():
        families.setdefault(s.family, []).append(s)
    for index, (family, members) in enumerate(families.items()):
        # Stable sort: methods at the same TTC keep the report's order.
        members = sorted(members, key=lambda s: max(s.mean_ttc, MIN_PLOT_TTC))
        xs = [max(s.mean_ttc, MIN_PLOT_TTC) for s in members]
        ys = [100.0 * s.accuracy for s in members]
        below = [max(0.0, 100.0 * (s.accuracy - s.ci95[0])) for s in members]
        above = [max(0.0, 100.0 * (s.ci95[1] - s.accuracy)) for s in members]
        color = f"C{index % 10}"
        ax.errorbar(
            xs,
            ys,
            yerr=[below, above],
            label=family,
            color=color,
            # One point has no line to draw; a line style would put one in the legend.
            linestyle="-" if len(members) > 1 else "none",
            marker=_MARKERS[index % len(_MARKERS)],
            markersize=7,
            linewidth=1.8,
            capsize=4,
            elinewidth=1.0,
        )
        for s, x, y in zip(members, xs, ys, strict=True):
            spot = (round(math.log10(x), 2), round(y, 1))
            stacked = labels_at.get(spot, 0)
            labels_at[spot] = stacked + 1
            ax.annotate(
                s.method,
                (x, y),
                xytext=(6, 6 + 11 * stacked),
                textcoords="offset points",
                fontsize=8,
                color=color,
            )
    # Explicit limits: matplotlib's log autoscale collapses to a zero-width range
    # when every point has the same TTC (a single method, or all failed), and the
    # right margin must leave room for the labels written to the right of points.
    ax.set_xlim(min(every_x) / 1.6, max(every_x) * 2.0)


def scaling_figure(stats: Mapping[str, MethodStats], *, title: str | None = None) -> Figure:
    """The scaling plot as a matplotlib ``Figure`` on its own Agg canvas (what gets saved).

    Raises ``ImportError`` naming the ``eval`` extra when matplotlib is missing.
    """
    fig = agg_figure(8.0, 5.0, dpi=120, purpose="the scaling plot")
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    if stats:
        _draw(ax, stats)
        ax.legend(title="method family", loc="best", fontsize=9)
        low, high = ax.get_ylim()
        ax.set_ylim(max(low, -2.0), min(high, 105.0))
    else:
        ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center", va="center")
        ax.set_ylim(0.0, 100.0)
    ax.set_xlabel("mean effective TTC per problem (tokens, log scale)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title or "Accuracy vs. effective test-time compute")
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.15)
    fig.tight_layout()
    return fig


def plot_scaling(stats: Mapping[str, MethodStats], path: Path, *, title: str | None = None) -> Path:
    """Draw accuracy (%) against mean effective TTC (log) to ``path``; return ``path``.

    One line per method family with more than one method (a lone method is a
    marker), points sorted by TTC, error bars from each method's ``ci95``,
    every point labelled with its method spec. The format follows the suffix
    (``.png`` by default in ``pacore eval``). A TTC of 0 is drawn at
    :data:`MIN_PLOT_TTC`; empty ``stats`` still writes a figure saying there
    are no results, so an eval whose every method produced nothing ends with
    a file rather than a traceback.

    Raises ``ImportError`` naming the ``eval`` extra when matplotlib is missing.
    """
    fig = scaling_figure(stats, title=title)
    path = Path(path)
    private_dir(path.parent)
    fig.savefig(path)
    os.chmod(path, FILE_MODE)  # private, as everything an eval writes (issue 31)
    return path
