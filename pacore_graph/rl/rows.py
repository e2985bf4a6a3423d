"""Write dataset rows as ``jsonl``, ``parquet`` or an ``hf`` ``save_to_disk`` folder.

``pacore export-episodes`` and ``pacore trainset`` both produce a table of
rows in one of these three formats; this is the one place that writes it, so
the two stay loadable the same way (``load_dataset("json"|"parquet", ...)``,
``load_from_disk``). ``jsonl`` needs nothing beyond the core; the tabular
formats need ``datasets`` + ``pyarrow`` and are written with an explicit
schema, so a column that happens to be empty still has its real type.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pacore_graph.rl import require_rl
from pacore_graph.runs.atomic import write_lines_atomic

__all__ = ["ROW_FORMATS", "check_row_format", "write_jsonl", "write_rows"]

ROW_FORMATS = ("jsonl", "parquet", "hf")


def check_row_format(fmt: str) -> None:
    """Raise a one-line ``ValueError`` unless ``fmt`` is one of :data:`ROW_FORMATS`."""
    if fmt not in ROW_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(ROW_FORMATS)}")


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line, written atomically (a reader never sees half a file)."""
    write_lines_atomic(path, (json.dumps(row, ensure_ascii=False) for row in rows))


def write_rows(
    rows: Iterable[Mapping[str, Any]],
    fmt: str,
    folder: Path,
    *,
    jsonl_name: str,
    parquet_name: str,
    features: Callable[[], Any],
    file: Path | None = None,
) -> Path:
    """Write ``rows`` in ``fmt`` and return what was written.

    ``jsonl`` and ``parquet`` go to ``file`` when given, else to
    ``folder / jsonl_name`` (``parquet_name``); ``hf`` makes ``folder`` a
    ``Dataset.save_to_disk`` folder. ``features`` builds the
    ``datasets.Features`` of a row; it is called only for the tabular formats,
    so ``jsonl`` never imports ``datasets``.
    """
    check_row_format(fmt)
    if fmt == "jsonl":
        path = file or folder / jsonl_name
        write_jsonl(path, rows)
        return path
    require_rl("datasets", "pyarrow")
    from datasets import Dataset

    dataset = Dataset.from_list([dict(row) for row in rows], features=features())
    if fmt == "parquet":
        path = file or folder / parquet_name
        path.parent.mkdir(parents=True, exist_ok=True)
        dataset.to_parquet(str(path))
        return path
    dataset.save_to_disk(str(folder))
    return folder
