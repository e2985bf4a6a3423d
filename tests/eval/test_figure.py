"""eval/figure: a figure on its own Agg canvas, without pyplot; a missing matplotlib is named."""

from __future__ import annotations

import io
import sys

import pytest

from pacore_graph.eval.figure import INSTALL_HINT, agg_figure


def test_the_figure_has_the_size_asked_for_and_draws_a_png() -> None:
    fig = agg_figure(3.0, 2.0, dpi=50, purpose="the test plot")
    assert tuple(fig.get_size_inches()) == (3.0, 2.0)
    out = io.BytesIO()
    fig.savefig(out, format="png")
    data = out.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 150  # width: 3 in at 50 dpi
    assert int.from_bytes(data[20:24], "big") == 100


def test_two_figures_are_independent_canvases() -> None:
    first = agg_figure(1, 1, dpi=10, purpose="a")
    second = agg_figure(1, 1, dpi=10, purpose="b")
    assert first.canvas is not second.canvas
    assert first.canvas.figure is first


def test_no_pyplot_is_imported() -> None:
    if "matplotlib.pyplot" in sys.modules:
        pytest.skip("pyplot already imported by another test")
    agg_figure(1, 1, dpi=10, purpose="a")
    assert "matplotlib.pyplot" not in sys.modules


def test_without_matplotlib_the_error_names_the_purpose_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError) as caught:
        agg_figure(1, 1, dpi=10, purpose="the scaling plot")
    assert str(caught.value) == (
        f"the scaling plot needs matplotlib, which is not installed: {INSTALL_HINT}"
    )
