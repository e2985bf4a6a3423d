"""gpqa-diamond: the correct choice lands on a letter fixed by the question's own Record ID."""

from __future__ import annotations

from pathlib import Path

from hub_fixtures import gpqa_row, write_parquet

from pacore_graph.eval.benchmarks.gpqa import shuffled_choices
from pacore_graph.eval.datasets_load import load_dataset_spec
from pacore_graph.eval.graders import auto_grader


def _rows(n: int) -> list[dict[str, object]]:
    return [
        gpqa_row(f"rec{i:04d}", f"Question {i}?", f"right {i}", [f"w{i}a", f"w{i}b", f"w{i}c"])
        for i in range(n)
    ]


def test_the_letter_points_at_the_correct_answer(tmp_path: Path) -> None:
    records = load_dataset_spec(
        f"gpqa-diamond:{write_parquet(_rows(12), tmp_path / 'g.parquet')}"
    ).records
    letters = set()
    for i, record in enumerate(records):
        letter = record.ground_truth["answer"]
        letters.add(letter)
        assert f"\n{letter}) right {i}\n" in record.messages[0]["content"] + "\n"
        assert record.raw["category"] == "choice"
        grader = auto_grader(record.raw["category"])
        assert grader.grade(f"so \\boxed{{{letter}}}", record.ground_truth).score == 1.0
    assert len(letters) > 1  # shuffled: the answer is not always A


def test_a_question_keeps_its_letters_whatever_else_is_loaded(tmp_path: Path) -> None:
    alone = load_dataset_spec(f"gpqa-diamond:{write_parquet(_rows(6)[5:], tmp_path / 'a.parquet')}")
    among = load_dataset_spec(f"gpqa-diamond:{write_parquet(_rows(6), tmp_path / 'b.parquet')}")
    assert alone.records[0].messages == among.records[5].messages
    assert shuffled_choices("x", "r", ["a", "b", "c"]) == shuffled_choices(
        "x", "r", ["a", "b", "c"]
    )
