"""Named benchmarks: built-ins, the pacore_graph.datasets entry points, module:attr."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hub_fixtures import matharena_row, write_parquet

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.benchmarks.registry import (
    BUILTIN_BENCHMARKS,
    benchmark_names,
    find_benchmark,
)
from pacore_graph.eval.datasets_load import load_dataset_spec

PLUGIN = """
from pacore_graph.eval.benchmarks.base import HubDataset
from pacore_graph.eval.benchmarks.math import MathArenaBenchmark

TINY = MathArenaBenchmark(
    name="tiny-bench",
    description="a third-party benchmark in MathArena's layout",
    hub=HubDataset("someone/tiny", split="train"),
    columns=("problem_idx", "problem", "answer"),
)

def make():
    return TINY

NOT_A_BENCHMARK = 42
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution declaring entry points (its dist-info on sys.path)."""
    (tmp_path / "plug_bench.py").write_text(PLUGIN, encoding="utf-8")
    info = tmp_path / "plug_bench-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plug-bench\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [pacore_graph.datasets]
            tiny-bench = plug_bench:TINY
            tiny-factory = plug_bench:make
            hmmt25 = plug_bench:TINY
            not-one = plug_bench:NOT_A_BENCHMARK
            broken = plug_bench:missing
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_builtins() -> None:
    assert list(BUILTIN_BENCHMARKS) == [
        "hmmt25",
        "aime25",
        "livecodebench",
        "hle",
        "gpqa-diamond",
        "multichallenge",
    ]
    assert find_benchmark("nope") is None


def test_entry_points_register_names(plugin: Path, tmp_path: Path) -> None:
    assert {"tiny-bench", "tiny-factory"} <= set(benchmark_names())
    bench = find_benchmark("tiny-bench")
    assert bench is not None and bench.hub.repo == "someone/tiny"  # type: ignore[union-attr]
    assert find_benchmark("tiny-factory") is bench
    # an installed package cannot replace a built-in
    assert find_benchmark("hmmt25") is BUILTIN_BENCHMARKS["hmmt25"]
    path = write_parquet([matharena_row(3, "Q", "9")], tmp_path / "t.parquet")
    (record,) = load_dataset_spec(f"tiny-bench:{path}").records
    assert (record.id, record.ground_truth) == ("tiny-bench-3", {"answer": "9"})


def test_bad_entry_points_are_one_line_errors(plugin: Path) -> None:
    with pytest.raises(DatasetError, match=r"entry point 'not-one' .* is a int, not a"):
        find_benchmark("not-one")
    with pytest.raises(
        DatasetError, match=r"entry point 'broken' .* failed to load: AttributeError"
    ):
        find_benchmark("broken")


def test_module_attr_names_one_without_registering(plugin: Path, tmp_path: Path) -> None:
    path = write_parquet([matharena_row(1, "Q", "2")], tmp_path / "m.parquet")
    (record,) = load_dataset_spec(f"plug_bench:TINY:{path}").records
    assert record.id == "tiny-bench-1"
    with pytest.raises(
        DatasetError, match="plug_bench:nothing: module 'plug_bench' has no 'nothing'"
    ):
        load_dataset_spec(f"plug_bench:nothing:{path}")
    with pytest.raises(DatasetError, match="cannot import 'no_such_module'"):
        load_dataset_spec(f"no_such_module:X:{path}")
