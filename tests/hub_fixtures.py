"""Benchmark fixtures in the hub's own formats, built in the test (nothing is fetched).

Each builder writes the real column names and encodings of one benchmark:

- MathArena (``MathArena/hmmt_feb_2025``, ``aime_2025``): ``problem_idx``
  int, ``problem``, ``answer``, ``problem_type`` a list of strings;
- LiveCodeBench (``livecodebench/code_generation_lite``, the row layout of
  ``CodeGenerationProblem`` in lcb_runner/benchmarks/code_generation.py):
  ``public_test_cases`` JSON text, ``private_test_cases``
  base64(zlib(pickle(JSON text))) exactly as :func:`lcb_private` encodes it,
  ``metadata`` JSON text with ``func_name``, ``contest_date`` ISO text;
- HLE (``cais/hle``): ``id``, ``question``, ``image`` ("" when none),
  ``answer``, ``answer_type`` (``exactMatch``/``multipleChoice``);
- GPQA (``Idavidrein/gpqa``, ``gpqa_diamond``): ``Question``, ``Correct
  Answer``, ``Incorrect Answer 1..3``, ``Record ID``;
- MultiChallenge (``benchmark_questions.jsonl``): ``QUESTION_ID``, ``AXIS``,
  ``CONVERSATION``, ``TARGET_QUESTION``, ``PASS_CRITERIA``.

Writers: :func:`write_parquet` (what the hub stores), :func:`write_saved`
(``Dataset.save_to_disk``), :func:`write_jsonl_rows`, and
:func:`seed_hub_cache`, which puts rows where ``datasets.load_dataset(REPO)``
finds them under ``HF_DATASETS_OFFLINE=1``, so a hub id is loaded by the
library's own code from a cache this test built.
"""

from __future__ import annotations

import base64
import json
import pickle
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "go_offline",
    "gpqa_row",
    "hle_row",
    "lcb_private",
    "lcb_row",
    "matharena_row",
    "multichallenge_row",
    "seed_hub_cache",
    "seed_hub_files",
    "write_jsonl_rows",
    "write_parquet",
    "write_saved",
]


def matharena_row(
    idx: int, problem: str, answer: Any, kinds: Sequence[str] = ("Algebra",)
) -> dict[str, Any]:
    return {"problem_idx": idx, "problem": problem, "answer": answer, "problem_type": list(kinds)}


def lcb_private(tests: list[dict[str, str]]) -> str:
    """LiveCodeBench's private-test encoding: base64(zlib(pickle(json.dumps(tests))))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("utf-8")


def lcb_row(
    question_id: str,
    *,
    public: list[dict[str, str]],
    private: list[dict[str, str]],
    func_name: str | None = None,
    starter_code: str = "",
    contest_date: str = "2024-09-14T00:00:00",
    private_text: str | None = None,
) -> dict[str, Any]:
    return {
        "question_title": f"Problem {question_id}",
        "question_content": f"Solve problem {question_id}.",
        "platform": "leetcode" if func_name else "atcoder",
        "question_id": question_id,
        "contest_id": "contest-1",
        "contest_date": contest_date,
        "starter_code": starter_code,
        "difficulty": "easy",
        "public_test_cases": json.dumps(public),
        "private_test_cases": private_text if private_text is not None else lcb_private(private),
        "metadata": json.dumps({"func_name": func_name} if func_name else {}),
    }


def hle_row(
    qid: str, question: str, answer: str, *, image: str = "", mc: bool = False
) -> dict[str, Any]:
    return {
        "id": qid,
        "question": question,
        "image": image,
        "answer": answer,
        "answer_type": "multipleChoice" if mc else "exactMatch",
        "category": "Math",
        "raw_subject": "Mathematics",
    }


def gpqa_row(record_id: str, question: str, correct: str, wrong: Sequence[str]) -> dict[str, Any]:
    return {
        "Question": question,
        "Correct Answer": correct,
        "Incorrect Answer 1": wrong[0],
        "Incorrect Answer 2": wrong[1],
        "Incorrect Answer 3": wrong[2],
        "Record ID": record_id,
        "High-level domain": "Physics",
    }


def multichallenge_row(
    qid: str, turns: Sequence[tuple[str, str]], target: str, criterion: str
) -> dict[str, Any]:
    return {
        "QUESTION_ID": qid,
        "AXIS": "INSTRUCTION_RETENTION",
        "CONVERSATION": [{"role": role, "content": content} for role, content in turns],
        "TARGET_QUESTION": target,
        "PASS_CRITERIA": criterion,
    }


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_saved(rows: list[dict[str, Any]], folder: Path, split: str | None = None) -> Path:
    """``Dataset.save_to_disk`` (a DatasetDict with one split when ``split`` is given)."""
    import datasets

    dataset = datasets.Dataset.from_list(rows)
    if split is not None:
        datasets.DatasetDict({split: dataset}).save_to_disk(str(folder))
    else:
        dataset.save_to_disk(str(folder))
    return folder


def write_jsonl_rows(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def seed_hub_cache(
    rows: list[dict[str, Any]], repo: str, cache: Path, *, split: str, config: str = "default"
) -> Path:
    """Rows where offline ``datasets.load_dataset(repo, split=split)`` finds them in ``cache``.

    Built with the library's parquet builder (what the hub's parquet files go
    through), then filed under the hub id's cache folder
    (``OWNER___NAME/CONFIG/0.0.0/HASH``), the place ``datasets`` looks when
    ``HF_DATASETS_OFFLINE=1``. Use ``HF_DATASETS_CACHE=cache`` in the reader.
    """
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.parquet.parquet import Parquet

    owner, name = repo.split("/")
    source = write_parquet(rows, cache.parent / f"{name}-{split}.parquet")
    staging = cache.parent / f"{name}-staging"
    builder = Parquet(
        cache_dir=str(staging),
        dataset_name=name,
        config_name=config,
        data_files=DataFilesDict.from_patterns({split: [str(source)]}),
        hash="0" * 16,
    )
    builder.download_and_prepare()
    built = Path(builder.cache_dir)  # staging/NAME/CONFIG-xxxx/0.0.0/HASH
    target = cache / f"{owner}___{name}" / config / "0.0.0" / built.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(built, target)
    shutil.rmtree(staging)
    return target


def seed_hub_files(files: dict[str, str], repo: str, hub_cache: Path) -> Path:
    """Files of a hub dataset repository in the hub cache, as ``hf_hub_download`` leaves them.

    ``HF_HUB_CACHE=hub_cache`` with ``HF_HUB_OFFLINE=1`` then finds them
    (``datasets--OWNER--NAME/snapshots/COMMIT/FILE``, ``refs/main`` naming COMMIT).
    """
    root = hub_cache / f"datasets--{repo.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (snapshot / name).write_text(text, encoding="utf-8")
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit, encoding="utf-8")
    return snapshot


def go_offline(monkeypatch: Any) -> None:
    """No hub traffic from this test: the variables, and the libraries' already-read copies."""
    import datasets
    from huggingface_hub import constants

    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
