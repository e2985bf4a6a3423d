"""``--dataset SPEC`` / ``--input SPEC``: what a dataset argument names, parsed before any read.

The forms, tried in this order:

- ``hf:OWNER/NAME[:CONFIG][@SPLIT]``: a hub dataset, read with
  ``datasets.load_dataset`` (a known column layout gets its benchmark's
  adapter, else the generic ``question``/``problem``/``prompt`` + ``answer`` map);
- an existing file or folder: a ``.jsonl`` in the ``pacore run`` format (read
  as before, bad lines skipped and reported), or a ``.parquet`` file or a
  dataset folder in a hub layout;
- ``NAME``: a named benchmark from its default hub source;
- ``NAME:PATH``: that benchmark's adapter over a local copy (parquet, JSONL,
  ``save_to_disk`` folder);
- ``module:attr``: a third-party :class:`~pacore_graph.eval.benchmarks.base.Benchmark`
  named by its import path (``module:attr:PATH`` over a local copy).

Named means built in or registered under the ``pacore_graph.datasets``
entry-point group. A spec that is none of these is refused with the forms it
could have taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.benchmarks.registry import benchmark_names

__all__ = ["HF_PREFIX", "DatasetSpec", "parse_dataset_spec"]

HF_PREFIX = "hf:"
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_PART = re.compile(r"^[\w.-]+$")
_MODULE_ATTR = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")

SpecKind = Literal["jsonl", "local", "hub", "benchmark"]


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """A parsed dataset argument.

    ``kind`` is ``jsonl`` (our own format), ``local`` (a hub-format copy, the
    adapter chosen by its columns), ``hub`` (``hf:``) or ``benchmark``
    (``NAME``, ``NAME:PATH``, ``module:attr``); ``benchmark`` is the name or
    ``module:attr``, ``path`` the local copy.
    """

    text: str
    kind: SpecKind
    path: Path | None = None
    repo: str | None = None
    config: str | None = None
    split: str | None = None
    benchmark: str | None = None


def _forms() -> str:
    return (
        "give a .jsonl/.parquet file or dataset folder, hf:OWNER/NAME[:CONFIG][@SPLIT], "
        f"or a benchmark NAME or NAME:PATH ({', '.join(benchmark_names())})"
    )


def _hub(text: str) -> DatasetSpec:
    rest = text[len(HF_PREFIX) :].strip()
    rest, at, split = rest.partition("@")
    repo, colon, config = rest.partition(":")
    if not _REPO.match(repo):
        raise DatasetError(f"{text}: expected hf:OWNER/NAME[:CONFIG][@SPLIT], got {repo!r}")
    if colon and not _PART.match(config):
        raise DatasetError(f"{text}: the config {config!r} is not a name")
    if at and not _PART.match(split):
        raise DatasetError(f"{text}: the split {split!r} is not a name")
    return DatasetSpec(text=text, kind="hub", repo=repo, config=config or None, split=split or None)


def _local(text: str, path: Path) -> DatasetSpec:
    if path.is_file() and path.suffix.lower() in (".jsonl", ".json", ".txt", ""):
        return DatasetSpec(text=text, kind="jsonl", path=path)
    return DatasetSpec(text=text, kind="local", path=path)


def parse_dataset_spec(text: str) -> DatasetSpec:
    """Parse one dataset argument; raises :class:`DatasetError` naming the forms when unknown."""
    text = str(text).strip()
    if not text:
        raise DatasetError(f"empty dataset: {_forms()}")
    if text.startswith(HF_PREFIX):
        return _hub(text)
    path = Path(text).expanduser()
    if path.exists():
        return _local(text, path)
    names = benchmark_names()
    if text in names:
        return DatasetSpec(text=text, kind="benchmark", benchmark=text)
    head, colon, tail = text.partition(":")
    if colon and head in names:
        if not tail:
            raise DatasetError(f"{text}: {head}:PATH needs a path after the colon")
        return DatasetSpec(text=text, kind="benchmark", benchmark=head, path=Path(tail))
    if colon:
        attr, colon2, local_path = tail.partition(":")
        if _MODULE_ATTR.match(f"{head}:{attr}"):
            return DatasetSpec(
                text=text,
                kind="benchmark",
                benchmark=f"{head}:{attr}",
                path=Path(local_path) if colon2 and local_path else None,
            )
    if "/" in text or path.suffix:
        # A path that is not there: the caller reports it as it reports any missing file.
        return DatasetSpec(text=text, kind="jsonl", path=path)
    raise DatasetError(f"{text}: not a file, a hub id or a benchmark name; {_forms()}")
