"""hle over cais/hle's layout: text questions judged, image questions skipped and counted."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_fixtures import hle_row, write_parquet, write_saved

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.benchmarks.hle import HLE_SYSTEM_EXACT, HLE_SYSTEM_MC
from pacore_graph.eval.datasets_load import load_dataset_spec

IMAGE = "data:image/png;base64,iVBORw0KGgo="


def _rows() -> list[dict[str, object]]:
    return [
        hle_row("6687ffb1091058ff19128813", "What is the smallest prime above 100?", "101"),
        hle_row("66e8db4fe1e483c59165a247", "Which is shown?", "B", image=IMAGE, mc=True),
        hle_row("670c1a137d9abe2d345031d4", "Pick one:\nA. x\nB. y", "A", mc=True),
        hle_row("6713fc1e6c34845ffef41aeb", "Name the curve in the figure.", "a cusp", image=IMAGE),
    ]


def test_text_questions_only_and_the_images_counted(tmp_path: Path) -> None:
    loaded = load_dataset_spec(f"hle:{write_saved(_rows(), tmp_path / 'hle', split='test')}")
    assert [r.id for r in loaded.records] == [
        "6687ffb1091058ff19128813",
        "670c1a137d9abe2d345031d4",
    ]
    assert loaded.skipped == {"image question": 2}
    assert loaded.notes() == [f"{tmp_path / 'hle'}: skipped 2 image question(s)"]


def test_the_official_prompt_per_answer_type_and_the_judge_rubric(tmp_path: Path) -> None:
    exact, mc = load_dataset_spec(f"hle:{write_parquet(_rows(), tmp_path / 'h.parquet')}").records
    assert exact.messages == (
        {"role": "system", "content": HLE_SYSTEM_EXACT},
        {"role": "user", "content": "What is the smallest prime above 100?"},
    )
    assert mc.messages[0] == {"role": "system", "content": HLE_SYSTEM_MC}
    assert exact.ground_truth == {"answer": "101", "answer_type": "exactMatch", "rubric": "hle"}
    assert (exact.raw["category"], mc.ground_truth["rubric"]) == ("judge", "hle")


def test_an_unknown_answer_type_is_a_row_error(tmp_path: Path) -> None:
    row = {**hle_row("q1", "Q?", "1"), "answer_type": "essay"}
    path = write_parquet([row], tmp_path / "h.parquet")
    with pytest.raises(DatasetError, match=r"row 1 \(id q1\): column 'answer_type' is 'essay'"):
        load_dataset_spec(f"hle:{path}")


def test_a_saved_dict_with_several_splits_needs_one_named(tmp_path: Path) -> None:
    import datasets

    folder = tmp_path / "two"
    ds = datasets.Dataset.from_list(_rows())
    datasets.DatasetDict({"test": ds, "dev": ds}).save_to_disk(str(folder))
    with pytest.raises(DatasetError, match=r"several splits \(test, dev\)"):
        load_dataset_spec(f"hle:{folder}")
