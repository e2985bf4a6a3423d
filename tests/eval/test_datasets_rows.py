"""Row sources: parquet in batches, save_to_disk folders, JSONL by line, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_fixtures import go_offline, write_parquet, write_saved

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.datasets_rows import local_source, offline


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    go_offline(monkeypatch)


def test_parquet_reads_every_row_in_order_across_batches(tmp_path: Path) -> None:
    rows = [{"n": i, "text": f"t{i}", "big": "x" * 10} for i in range(150)]  # > 2 batches
    source = local_source(write_parquet(rows, tmp_path / "p.parquet"), wanted=("n", "text"))
    assert source.columns == ("n", "text", "big")
    got = list(source.rows)
    assert [number for number, _ in got] == list(range(1, 151))
    assert got[149][1] == {"n": 149, "text": "t149"}  # only the wanted columns are read


def test_saved_dataset_and_dataset_dict(tmp_path: Path) -> None:
    plain = local_source(write_saved([{"a": 1}, {"a": 2}], tmp_path / "plain"))
    assert list(plain.rows) == [(1, {"a": 1}), (2, {"a": 2})]
    split = local_source(write_saved([{"a": 3}], tmp_path / "dict", split="test"))
    assert list(split.rows) == [(1, {"a": 3})]
    with pytest.raises(DatasetError, match="no split 'train' \\(splits: test\\)"):
        local_source(tmp_path / "dict", split="train")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("x.parquet", b"not parquet", "not a parquet file"),
        ("x.csv", b"a,b\n", "not a .parquet or .jsonl file"),
        ("x.jsonl", b"{bad\n", "line 1: not valid JSON"),
    ],
)
def test_unreadable_files_name_themselves(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DatasetError) as info:
        list(local_source(path).rows)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_a_plain_folder_is_not_a_dataset_unless_a_benchmark_reads_a_repo_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    folder = tmp_path / "clone"
    write_parquet([{"a": 1}], folder / "data" / "train-00000-of-00001.parquet")
    with pytest.raises(DatasetError, match="is a directory, not a dataset file"):
        local_source(folder)
    assert list(local_source(folder, repo_folder=True).rows) == [(1, {"a": 1})]


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file or folder"):
        local_source(tmp_path / "gone.parquet")


def test_offline_reads_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert not offline()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert offline()
