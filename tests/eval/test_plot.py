"""eval/plot: the scaling figure of a report's methods, drawn without pyplot."""

from __future__ import annotations

import dataclasses
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from report_support import LINES, PNG_MAGIC, WALL, M, P, S, run

from pacore_graph.eval.plot import plot_scaling, scaling_figure
from pacore_graph.eval.report import (
    MethodStats,
    summarize,
)


@pytest.fixture
def stats() -> dict[str, MethodStats]:
    return summarize(iter(LINES), wall_s=WALL)


# --------------------------------------------------------------------------- plot


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which the PNG spec puts first."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_scaling_png(tmp_path: Path, stats: dict[str, MethodStats]) -> None:
    more = dict(stats)
    more["pacore:medium"] = dataclasses.replace(
        stats[P], method="pacore:medium", accuracy=0.8, ci95=(0.5, 0.95), mean_ttc=4000.0
    )
    out = plot_scaling(more, tmp_path / "plots" / "scaling.png", title="test")
    assert out == tmp_path / "plots" / "scaling.png"
    assert out.stat().st_size > 1000
    width, height = png_size(out)
    assert 400 <= width <= 4000
    assert 300 <= height <= 3000
    assert width > height  # landscape, like the paper's figure


def test_plot_single_method_and_all_failed(tmp_path: Path) -> None:
    single = summarize([run(S, "a", 0, 1.0, effective_ttc=50)])
    assert png_size(plot_scaling(single, tmp_path / "one.png")) > (0, 0)
    failed = summarize(
        [run(M, p, 0, 0.0, error="connection refused", effective_ttc=0) for p in "abc"]
        + [run(P, p, 0, 0.0, error="connection refused", effective_ttc=0) for p in "abc"]
    )
    assert failed[M].mean_ttc == 0.0
    assert png_size(plot_scaling(failed, tmp_path / "failed.png")) > (0, 0)
    assert png_size(plot_scaling({}, tmp_path / "empty.png")) > (0, 0)


def test_plot_does_not_touch_pyplot(tmp_path: Path) -> None:
    if "matplotlib.pyplot" in sys.modules:
        pytest.skip("pyplot already imported by another test")
    plot_scaling(summarize(LINES), tmp_path / "s.png")
    assert "matplotlib.pyplot" not in sys.modules


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"pip install 'pacore-graph\[eval\]'"):
        plot_scaling(summarize(LINES), tmp_path / "s.png")
    assert not (tmp_path / "s.png").exists()


def test_plot_single_ttc_has_a_visible_x_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: matplotlib's log autoscale gave xlim (50, 50) for one point, drawing nothing.
    from matplotlib.figure import Figure

    seen: list[tuple[float, float]] = []
    original = Figure.savefig

    def spy(self: Figure, *args: Any, **kwargs: Any) -> None:
        seen.append(self.axes[0].get_xlim())
        original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    plot_scaling(summarize([run(S, "a", 0, 1.0, effective_ttc=50)]), tmp_path / "one.png")
    plot_scaling(summarize([run(S, "a", 0, 0.0, error="x")]), tmp_path / "zero.png")
    (lo, hi), (zlo, zhi) = seen
    assert lo < 50 < hi
    assert zlo < 1.0 < zhi  # TTC 0 drawn at 1 on the log axis


def test_the_legend_draws_a_line_only_for_families_with_several_points(
    stats: dict[str, MethodStats],
) -> None:
    """A family of one method is a point: its legend entry must not promise a line."""
    more = dict(stats)
    more["pacore:medium"] = dataclasses.replace(
        stats[P], method="pacore:medium", accuracy=0.8, ci95=(0.5, 0.95), mean_ttc=4000.0
    )
    fig = scaling_figure(more)
    ax = fig.axes[0]
    families = {s.family: 0 for s in more.values()}
    for s in more.values():
        families[s.family] += 1
    handles, labels = ax.get_legend_handles_labels()
    styles = {
        label: handle.lines[0].get_linestyle()
        for handle, label in zip(handles, labels, strict=True)
    }
    assert set(styles) == set(families)
    for family, count in families.items():
        drawn = styles[family] not in ("None", "none", "", " ")
        assert drawn == (count > 1), (family, count, styles[family])
    assert any(count > 1 for count in families.values())
    assert any(count == 1 for count in families.values())


def test_each_method_family_of_a_comparison_has_its_legend_entry_and_point(
    stats: dict[str, MethodStats],
) -> None:
    """RSA and DeepConf beside PaCoRe: one legend entry per family, each method a labelled point."""
    base = stats[P]
    specs = {
        "rsa:16,4,3": "rsa",
        "rsa:16,4,5": "rsa",
        "deepconf:16": "deepconf",
        "deepconf-online:16": "deepconf-online",
    }
    more = dict(stats)
    for i, (spec, family) in enumerate(specs.items()):
        more[spec] = dataclasses.replace(
            base, method=spec, family=family, accuracy=0.5 + i / 20, mean_ttc=1000.0 * (i + 2)
        )
    ax = scaling_figure(more).axes[0]
    _, labels = ax.get_legend_handles_labels()
    assert sorted(labels) == sorted({s.family for s in more.values()})
    written = {t.get_text() for t in ax.texts}
    assert set(specs) <= written
