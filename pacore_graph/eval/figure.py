"""A matplotlib figure on its own Agg canvas, or an error naming the extra that brings it.

The scaling plot and the message-graph picture both draw this way: no
``pyplot``, so no global figure registry, no GUI backend, safe in threads and
in a host program that uses pyplot itself. matplotlib is an optional
dependency (the ``eval`` extra), imported only when something is drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["INSTALL_HINT", "agg_figure"]

INSTALL_HINT = "pip install 'pacore-graph[eval]'"


def agg_figure(width: float, height: float, *, dpi: int, purpose: str) -> Figure:
    """A ``width`` x ``height`` inch figure attached to a fresh Agg canvas.

    Raises ``ImportError`` saying ``purpose`` needs matplotlib and how to
    install it, when matplotlib is missing.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs matplotlib, which is not installed: {INSTALL_HINT}"
        ) from exc
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig
