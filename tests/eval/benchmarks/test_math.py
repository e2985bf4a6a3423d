"""hmmt25 / aime25 over MathArena's own layout (parquet, as the hub stores it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_fixtures import matharena_row, write_parquet

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.benchmarks.math import MATH_INSTRUCTION
from pacore_graph.eval.datasets_load import load_dataset_spec
from pacore_graph.eval.graders import auto_grader


def test_hmmt25_rows_become_math_records(tmp_path: Path) -> None:
    path = write_parquet(
        [
            matharena_row(1, "Compute $1+1$.", "2", ["Algebra"]),
            matharena_row(2, "Find $x$.", "\\frac{1}{2}", ["Geometry", "Algebra"]),
        ],
        tmp_path / "train-00000-of-00001.parquet",
    )
    loaded = load_dataset_spec(f"hmmt25:{path}")
    assert loaded.benchmark == "hmmt25"
    first, second = loaded.records
    assert first.id == "hmmt25-1"
    assert first.messages == ({"role": "user", "content": f"Compute $1+1$.\n\n{MATH_INSTRUCTION}"},)
    assert second.ground_truth == {"answer": "\\frac{1}{2}"}
    assert second.raw["problem_type"] == ["Geometry", "Algebra"]
    # the record's category picks the math grader, which reads the boxed answer
    grader = auto_grader(second.raw["category"])
    assert grader.grade("so \\boxed{0.5}", second.ground_truth).score == 1.0


def test_aime25_integer_answers_are_text(tmp_path: Path) -> None:
    path = write_parquet([matharena_row(1, "How many?", 70)], tmp_path / "aime.parquet")
    (record,) = load_dataset_spec(f"aime25:{path}").records
    assert (record.id, record.ground_truth) == ("aime25-1", {"answer": "70"})


def test_a_row_without_answer_names_file_row_and_id(tmp_path: Path) -> None:
    path = write_parquet(
        [matharena_row(1, "Q1", "1"), matharena_row(7, "Q2", None)], tmp_path / "bad.parquet"
    )
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"hmmt25:{path}")
    assert str(info.value) == f"{path}: row 2 (id 7): column 'answer' is NoneType, not text"


def test_a_file_of_another_layout_names_the_missing_column(tmp_path: Path) -> None:
    path = write_parquet([{"problem": "Q", "solution": "1"}], tmp_path / "other.parquet")
    with pytest.raises(DatasetError, match=r"no column 'problem_idx', 'answer' for hmmt25"):
        load_dataset_spec(f"hmmt25:{path}")
