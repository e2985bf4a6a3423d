"""Dataset arguments: hub ids, named benchmarks, NAME:PATH, module:attr, paths; bad ones refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.datasets_spec import parse_dataset_spec


@pytest.mark.parametrize(
    ("text", "repo", "config", "split"),
    [
        ("hf:MathArena/hmmt_feb_2025", "MathArena/hmmt_feb_2025", None, None),
        ("hf:Idavidrein/gpqa:gpqa_diamond", "Idavidrein/gpqa", "gpqa_diamond", None),
        ("hf:cais/hle@test", "cais/hle", None, "test"),
        ("hf:Idavidrein/gpqa:gpqa_diamond@train", "Idavidrein/gpqa", "gpqa_diamond", "train"),
    ],
)
def test_hub_ids(text: str, repo: str, config: str | None, split: str | None) -> None:
    spec = parse_dataset_spec(text)
    assert (spec.kind, spec.repo, spec.config, spec.split) == ("hub", repo, config, split)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hf:noslash", "expected hf:OWNER/NAME"),
        ("hf:a/b:c d", "config 'c d' is not a name"),
        ("hf:a/b@", "hf:a/b@"),
        ("hf:a/b@x/y", "split 'x/y' is not a name"),
        ("hmmt25:", "needs a path"),
        ("nosuchbench", "not a file, a hub id or a benchmark name"),
        ("", "empty dataset"),
    ],
)
def test_bad_specs_are_refused_naming_the_forms(text: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        parse_dataset_spec(text)


def test_unknown_name_lists_the_benchmarks() -> None:
    with pytest.raises(DatasetError) as info:
        parse_dataset_spec("hmmt24")
    for name in ("hmmt25", "aime25", "livecodebench", "hle", "gpqa-diamond", "multichallenge"):
        assert name in str(info.value)


def test_names_and_local_copies(tmp_path: Path) -> None:
    assert parse_dataset_spec("livecodebench").benchmark == "livecodebench"
    local = parse_dataset_spec(f"hle:{tmp_path / 'hle.parquet'}")
    assert (local.kind, local.benchmark, local.path) == (
        "benchmark",
        "hle",
        tmp_path / "hle.parquet",
    )


def test_existing_paths(tmp_path: Path) -> None:
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("{}\n")
    parquet = tmp_path / "d.parquet"
    parquet.write_bytes(b"")
    assert parse_dataset_spec(str(jsonl)).kind == "jsonl"
    assert parse_dataset_spec(str(parquet)).kind == "local"
    assert parse_dataset_spec(str(tmp_path)).kind == "local"
    # a missing path stays a path: the command reports it as any missing file
    assert parse_dataset_spec(str(tmp_path / "gone.jsonl")).kind == "jsonl"


def test_module_attr() -> None:
    spec = parse_dataset_spec("my_pkg.bench:BENCH")
    assert (spec.kind, spec.benchmark, spec.path) == ("benchmark", "my_pkg.bench:BENCH", None)
    spec = parse_dataset_spec("my_pkg.bench:BENCH:data/x.parquet")
    assert (spec.benchmark, spec.path) == ("my_pkg.bench:BENCH", Path("data/x.parquet"))
