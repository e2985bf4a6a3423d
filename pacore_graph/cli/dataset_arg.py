"""``--dataset SPEC`` (eval) and ``--input SPEC`` (run): checked first, loaded after the flags.

Two steps, so a bad flag is reported before a large benchmark is read and a
bad dataset before any model call: :func:`check_dataset_arg` parses the spec
(and, for a plain JSONL path, checks the file is readable, with the messages
``pacore`` always gave); :func:`load_dataset_arg` reads the records, prints
every left-out line or row on stderr (never silent) and turns a dataset that
cannot be used into a one-line ``pacore: error:``.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacore_graph.cli.common import UsageError, readable_file

if TYPE_CHECKING:
    from pacore_graph.eval.datasets_load import LoadedDataset
    from pacore_graph.eval.datasets_spec import DatasetSpec

__all__ = ["check_dataset_arg", "dataset_meta", "load_dataset_arg"]


def check_dataset_arg(text: str | Path, flag: str) -> DatasetSpec:
    """The parsed spec; UsageError for an unknown form or an unreadable JSONL file."""
    from pacore_graph.eval.benchmarks.base import DatasetError
    from pacore_graph.eval.datasets_spec import parse_dataset_spec

    try:
        spec = parse_dataset_spec(str(text))
    except DatasetError as exc:
        raise UsageError(f"{flag} {exc}") from None
    if spec.kind == "jsonl":
        assert spec.path is not None
        readable_file(spec.path, flag)
    return spec


def load_dataset_arg(
    spec: DatasetSpec, flag: str, *, since: date | None = None, until: date | None = None
) -> LoadedDataset:
    """Every record of ``spec``; skipped lines/rows printed on stderr; UsageError if unusable."""
    from pacore_graph.eval.benchmarks.base import DatasetError
    from pacore_graph.eval.datasets_load import load_dataset_spec

    try:
        loaded = load_dataset_spec(spec.text, since=since, until=until)
    except DatasetError as exc:
        raise UsageError(f"{flag} {exc}") from None
    for err in loaded.input_errors:
        print(f"{loaded.source}:{err}", file=sys.stderr)
    for note in loaded.notes():
        print(note, file=sys.stderr)
    return loaded


def dataset_meta(loaded: LoadedDataset) -> dict[str, Any]:
    """What a report says about its dataset: the spec, the benchmark, what was left out."""
    meta: dict[str, Any] = {"dataset": loaded.spec.text}
    if loaded.benchmark:
        meta["benchmark"] = loaded.benchmark
    if loaded.skipped:
        meta["skipped"] = dict(loaded.skipped)
    if loaded.filtered:
        meta["outside_window"] = loaded.filtered
    return meta
