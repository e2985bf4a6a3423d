"""Where a benchmark's rows come from: the hub, a parquet file, a ``save_to_disk`` folder, JSONL.

Every source yields the same thing, ``(row number, {column: value})`` in
order, through :class:`RowSource`, so an adapter never knows whether it reads
the hub or a local copy in the hub's format, and a test fixture in that format
goes through the code a hub id takes from the first row on:

- ``datasets.load_dataset(repo, config, split=...)`` for a hub id (which
  honours ``HF_DATASETS_OFFLINE=1`` and the local cache), and for a local
  folder of data files laid out as a hub repository;
- ``datasets.load_from_disk`` for a folder written by ``save_to_disk``;
- pyarrow's parquet reader for a ``.parquet`` file, batch by batch (the hub
  stores datasets as parquet; LiveCodeBench's private tests make rows of
  megabytes, so the file is never read whole);
- the package's one JSONL reader for ``.jsonl`` (a bad line names its number);
- ``huggingface_hub.hf_hub_download`` for hub repositories whose data are
  plain files beside a loading script ``datasets`` no longer runs.

Only the columns an adapter reads are loaded. Any failure is a
:class:`~pacore_graph.eval.benchmarks.base.DatasetError` whose one-line
message names the file or hub id.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.eval.benchmarks.base import DatasetError, HubDataset, HubFiles
from pacore_graph.runs.jsonl import BadLine, read_lines

__all__ = [
    "HUB_EXTRA",
    "RowSource",
    "hub_file_sources",
    "hub_source",
    "local_source",
    "offline",
]

HUB_EXTRA = "pip install 'pacore-graph[hub]' (the datasets and pyarrow packages)"
_BATCH_ROWS = 64


@dataclass(frozen=True, slots=True)
class RowSource:
    """One file's (or hub split's) rows: its name for messages, its columns, the rows."""

    where: str
    columns: tuple[str, ...]
    rows: Iterator[tuple[int, dict[str, Any]]]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "Dataset scripts are no longer supported" in text:
        text += "; a named benchmark reads such a repository's data files (e.g. livecodebench)"
    return text[:400]


def offline() -> bool:
    """True when ``HF_DATASETS_OFFLINE`` or ``HF_HUB_OFFLINE`` asks for no network."""
    return any(
        os.environ.get(v, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
        for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
    )


def _datasets(where: str) -> Any:
    try:
        import datasets
    except ImportError:
        raise DatasetError(f"{where}: reading it needs the datasets package: {HUB_EXTRA}") from None
    return datasets


def _pick_split(loaded: Any, split: str | None, where: str) -> Any:
    """A Dataset from what ``load_dataset``/``load_from_disk`` returned (maybe a DatasetDict)."""
    if not hasattr(loaded, "keys"):  # already one split
        return loaded
    names = list(loaded.keys())
    if split is not None:
        if split not in names:
            raise DatasetError(f"{where}: no split {split!r} (splits: {', '.join(names)})")
        return loaded[split]
    if len(names) == 1:
        return loaded[names[0]]
    raise DatasetError(f"{where}: several splits ({', '.join(names)}); name one with @SPLIT")


def _dataset_rows(dataset: Any, wanted: Sequence[str] | None) -> tuple[tuple[str, ...], Any]:
    columns = tuple(dataset.column_names)
    if wanted is not None:
        keep = [c for c in wanted if c in columns]
        if keep:
            dataset = dataset.select_columns(keep)
    return columns, dataset


def _iterate(dataset: Any, where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        for number, row in enumerate(dataset, start=1):
            yield number, dict(row)
    except DatasetError:
        raise
    except Exception as exc:
        raise DatasetError(f"{where}: unreadable ({_one_line(exc)})") from None


def hub_source(hub: HubDataset, wanted: Sequence[str] | None = None) -> RowSource:
    """A hub dataset's split through ``datasets.load_dataset``."""
    where = f"hf:{hub.repo}" + (f":{hub.config}" if hub.config else "")
    datasets = _datasets(where)
    try:
        loaded = datasets.load_dataset(hub.repo, hub.config, split=hub.split)
    except Exception as exc:
        raise DatasetError(f"{where}: cannot load ({_one_line(exc)})") from None
    dataset = _pick_split(loaded, hub.split, where)
    columns, dataset = _dataset_rows(dataset, wanted)
    return RowSource(
        where + (f"@{hub.split}" if hub.split else ""), columns, _iterate(dataset, where)
    )


def hub_file_sources(hub: HubFiles) -> list[RowSource]:
    """Each JSONL file of a hub repository, fetched into (or, offline, found in) the hub cache."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise DatasetError(
            f"hf:{hub.repo}: reading it needs huggingface_hub: {HUB_EXTRA}"
        ) from None
    sources = []
    for name in hub.files:
        where = f"hf:{hub.repo}/{name}"
        try:
            path = hf_hub_download(hub.repo, name, repo_type="dataset", local_files_only=offline())
        except Exception as exc:
            raise DatasetError(f"{where}: cannot fetch ({_one_line(exc)})") from None
        source = _jsonl_source(Path(path))
        sources.append(RowSource(where, source.columns, source.rows))
    return sources


def _is_saved_dataset(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def local_source(
    path: Path,
    wanted: Sequence[str] | None = None,
    split: str | None = None,
    *,
    repo_folder: bool = False,
) -> RowSource:
    """A local copy in the hub's format: ``.parquet``, ``.jsonl``, or a folder.

    A folder is one written by ``save_to_disk``; with ``repo_folder`` (a
    benchmark named, ``NAME:DIR``) also a clone of the hub repository, read
    by the hub's own loader.
    """
    where = str(path)
    if not path.exists():
        raise DatasetError(f"{where}: no such file or folder")
    if path.is_dir():
        saved = _is_saved_dataset(path)
        if not saved and not repo_folder:
            raise DatasetError(
                f"{where}: is a directory, not a dataset file nor a folder written by "
                "save_to_disk (NAME:DIR also reads a clone of the benchmark's hub repository)"
            )
        datasets = _datasets(where)
        try:
            if saved:
                loaded = datasets.load_from_disk(str(path))
            else:  # data files laid out as a hub repository: the hub's own loader
                loaded = datasets.load_dataset(str(path), split=split)
        except Exception as exc:
            raise DatasetError(f"{where}: not a dataset folder ({_one_line(exc)})") from None
        columns, dataset = _dataset_rows(_pick_split(loaded, split, where), wanted)
        return RowSource(where, columns, _iterate(dataset, where))
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _parquet_source(path, wanted)
    if suffix in (".jsonl", ".json"):
        return _jsonl_source(path)
    raise DatasetError(f"{where}: not a .parquet or .jsonl file, nor a dataset folder")


def _parquet_source(path: Path, wanted: Sequence[str] | None) -> RowSource:
    where = str(path)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError(f"{where}: reading parquet needs pyarrow: {HUB_EXTRA}") from None
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:
        raise DatasetError(f"{where}: not a parquet file ({_one_line(exc)})") from None
    columns = tuple(parquet.schema_arrow.names)
    keep = [c for c in wanted if c in columns] if wanted is not None else None

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        number = 0
        try:
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=keep or None):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
        except Exception as exc:
            raise DatasetError(
                f"{where}: unreadable after row {number} ({_one_line(exc)})"
            ) from None
        finally:
            parquet.close()

    return RowSource(where, columns, rows())


def _jsonl_source(path: Path) -> RowSource:
    """A JSONL file's objects; a bad line is a malformed dataset, named by its line."""
    where = str(path)
    try:
        lines = read_lines(path)
        first = next(lines, None)
    except OSError as exc:
        raise DatasetError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if isinstance(first, BadLine):
        raise DatasetError(f"{where}: line {first.line}: {first.reason}")
    columns = tuple(first.data) if first is not None else ()

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        if first is None:
            return
        yield first.line, first.data
        try:
            for item in lines:
                if isinstance(item, BadLine):
                    raise DatasetError(f"{where}: line {item.line}: {item.reason}")
                yield item.line, item.data
        except OSError as exc:
            raise DatasetError(f"{where}: cannot read ({exc.strerror or exc})") from None

    return RowSource(where, columns, rows())
