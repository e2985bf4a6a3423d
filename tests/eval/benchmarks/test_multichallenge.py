"""multichallenge over the published benchmark_questions.jsonl: conversations and pass criteria."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_fixtures import multichallenge_row, write_jsonl_rows, write_parquet

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.datasets_load import load_dataset_spec

TURNS = [
    ("user", "I am vegan. Suggest a dinner."),
    ("assistant", "Try a lentil curry."),
    ("user", "And a dessert?"),
]


def test_the_conversation_is_the_prompt_and_the_criterion_the_answer(tmp_path: Path) -> None:
    path = write_jsonl_rows(
        [multichallenge_row("q1", TURNS, "Does the dessert avoid animal products?", "yes")],
        tmp_path / "benchmark_questions.jsonl",
    )
    (record,) = load_dataset_spec(f"multichallenge:{path}").records
    assert record.messages == tuple({"role": r, "content": c} for r, c in TURNS)
    assert record.ground_truth == {
        "answer": "YES",
        "target_question": "Does the dessert avoid animal products?",
        "rubric": "multichallenge",
    }
    assert (record.id, record.raw["category"], record.raw["axis"]) == (
        "q1",
        "judge",
        "INSTRUCTION_RETENTION",
    )


def test_a_mirror_storing_the_conversation_as_json_text(tmp_path: Path) -> None:
    row = multichallenge_row("q2", TURNS, "T?", "NO")
    row["CONVERSATION"] = json.dumps(row["CONVERSATION"])
    (record,) = load_dataset_spec(
        f"multichallenge:{write_parquet([row], tmp_path / 'm.parquet')}"
    ).records
    assert len(record.messages) == 3 and record.ground_truth["answer"] == "NO"


@pytest.mark.parametrize(
    ("turns", "criterion", "message"),
    [
        (TURNS[:2], "YES", "CONVERSATION does not end with a user turn"),
        (TURNS, "MAYBE", "column 'PASS_CRITERIA' is 'MAYBE', not YES or NO"),
        ([("robot", "hi")], "YES", "CONVERSATION[0] is not a {role, content} message"),
    ],
)
def test_malformed_rows(
    tmp_path: Path, turns: list[tuple[str, str]], criterion: str, message: str
) -> None:
    good = multichallenge_row("q1", TURNS, "T?", "YES")
    bad = multichallenge_row("q2", turns, "T?", criterion)
    path = write_jsonl_rows([good, bad], tmp_path / "b.jsonl")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"multichallenge:{path}")
    assert str(info.value) == f"{path}: row 2 (id q2): {message}"


def test_a_bad_json_line_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(multichallenge_row("q1", TURNS, "T?", "YES")) + "\n{oops\n")
    with pytest.raises(DatasetError, match=r"b\.jsonl: line 2: not valid JSON"):
        load_dataset_spec(f"multichallenge:{path}")
