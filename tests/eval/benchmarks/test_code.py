"""livecodebench over LiveCodeBench's own layout: tests decoded (safely), dates, the hub files."""

from __future__ import annotations

import json
import os
import pickle
from datetime import date, datetime
from pathlib import Path

import pytest
from hub_fixtures import lcb_private, lcb_row, seed_hub_files, write_parquet, write_saved

from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.benchmarks.code import LIVECODEBENCH_FILES, lcb_prompt
from pacore_graph.eval.code_tests import CodeTest, code_tests_of
from pacore_graph.eval.datasets_load import load_dataset_spec

STDIN_PUBLIC = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
STDIN_PRIVATE = [
    {"input": "2 2\n", "output": "4\n", "testtype": "stdin"},
    {"input": "5 7\n", "output": "12\n", "testtype": "stdin"},
]
STARTER = (
    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        "
)


def _rows() -> list[dict[str, object]]:
    return [
        lcb_row("abc380_a", public=STDIN_PUBLIC, private=STDIN_PRIVATE),
        lcb_row(
            "two-sum",
            public=[{"input": "[2, 7, 11, 15]\n9", "output": "[0, 1]", "testtype": "functional"}],
            private=[{"input": "[3, 3]\n6", "output": "[0, 1]", "testtype": "functional"}],
            func_name="twoSum",
            starter_code=STARTER,
            contest_date="2025-03-01T00:00:00",
        ),
    ]


def test_tests_are_decoded_public_first(tmp_path: Path) -> None:
    path = write_parquet(_rows(), tmp_path / "lcb.parquet")
    loaded = load_dataset_spec(f"livecodebench:{path}")
    stdin, functional = loaded.records
    tests = code_tests_of(stdin.ground_truth)
    assert tests is not None and tests.fn_name is None and tests.starter_code == ""
    assert tests.tests == (
        CodeTest("1 2\n", "3\n", "stdin", public=True),
        CodeTest("2 2\n", "4\n", "stdin", public=False),
        CodeTest("5 7\n", "12\n", "stdin", public=False),
    )
    assert stdin.raw["category"] == "code" and stdin.raw["platform"] == "atcoder"
    assert stdin.messages[0]["content"] == lcb_prompt("Solve problem abc380_a.", "")
    ftests = code_tests_of(functional.ground_truth)
    assert ftests is not None
    assert (ftests.fn_name, ftests.public_count, len(ftests.tests)) == ("twoSum", 1, 2)
    assert f"```python\n{STARTER}\n```" in functional.messages[0]["content"]
    # the ground truth is plain JSON: it survives a results file
    assert code_tests_of(json.loads(json.dumps(functional.ground_truth))) == ftests


def test_plain_json_private_tests_are_read_too(tmp_path: Path) -> None:
    row = lcb_row("p1", public=STDIN_PUBLIC, private=[], private_text=json.dumps(STDIN_PRIVATE))
    (record,) = load_dataset_spec(
        f"livecodebench:{write_parquet([row], tmp_path / 'l.parquet')}"
    ).records
    tests = code_tests_of(record.ground_truth)
    assert tests is not None and len(tests.tests) == 3


def test_since_until_keep_the_window_both_days_inclusive(tmp_path: Path) -> None:
    rows = [
        lcb_row(f"q{i}", public=STDIN_PUBLIC, private=[], contest_date=day)
        for i, day in enumerate(
            [
                "2024-07-31T00:00:00",
                "2024-08-01T00:00:00",
                "2025-05-31T00:00:00",
                "2025-06-01T00:00:00",
            ]
        )
    ]
    path = write_parquet(rows, tmp_path / "dated.parquet")
    loaded = load_dataset_spec(
        f"livecodebench:{path}", since=date(2024, 8, 1), until=date(2025, 5, 31)
    )
    assert [r.id for r in loaded.records] == ["q1", "q2"]
    assert loaded.filtered == 2
    assert "2 row(s) outside --since/--until left out" in loaded.notes()[0]


def test_timestamp_dates_of_a_parquet_copy(tmp_path: Path) -> None:
    rows = [lcb_row("q", public=STDIN_PUBLIC, private=[])]
    rows[0]["contest_date"] = datetime(2024, 9, 1)  # a parquet timestamp column
    path = write_parquet(rows, tmp_path / "ts.parquet")
    assert len(load_dataset_spec(f"livecodebench:{path}", since=date(2024, 9, 1)).records) == 1
    assert load_dataset_spec(f"livecodebench:{path}", since=date(2024, 9, 2)).filtered == 1


def test_dates_are_refused_for_an_undated_benchmark(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="hmmt25 has not"):
        load_dataset_spec(f"hmmt25:{tmp_path / 'x.parquet'}", since=date(2024, 1, 1))


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_private_test_field_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    import base64
    import zlib

    marker = tmp_path / "pwned"
    evil = base64.b64encode(zlib.compress(pickle.dumps(_Touch(marker)))).decode()
    rows = [
        lcb_row("fine", public=STDIN_PUBLIC, private=STDIN_PRIVATE),
        lcb_row("evil", public=STDIN_PUBLIC, private=[], private_text=evil),
    ]
    path = write_saved(rows, tmp_path / "saved")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"livecodebench:{path}")
    message = str(info.value)
    assert message.startswith(f"{path}: row 2 (id evil): ")
    assert "system: refused" in message and "\n" not in message
    assert not marker.exists()


def _pickled(value: object, protocol: int = pickle.DEFAULT_PROTOCOL) -> str:
    import base64
    import zlib

    return base64.b64encode(zlib.compress(pickle.dumps(value, protocol=protocol))).decode()


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (tuple(STDIN_PRIVATE), "holds a tuple"),
        (json.dumps(STDIN_PRIVATE).encode(), "holds bytes"),
    ],
    ids=["tuple", "bytes"],
)
def test_a_private_field_pickling_other_than_text_is_refused_naming_the_row(
    tmp_path: Path, value: object, what: str
) -> None:
    rows = [
        lcb_row("fine", public=STDIN_PUBLIC, private=STDIN_PRIVATE),
        lcb_row("odd", public=STDIN_PUBLIC, private=[], private_text=_pickled(value)),
    ]
    path = write_parquet(rows, tmp_path / "odd.parquet")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"livecodebench:{path}")
    message = str(info.value)
    assert message.startswith(f"{path}: row 2 (id odd): column 'private_test_cases': the pickle ")
    assert what in message and "refused" in message and "\n" not in message


def test_a_memo_bomb_row_is_refused_naming_the_row_before_it_costs_memory(
    tmp_path: Path,
) -> None:
    """Issue 31: a LONG_BINPUT far ahead made the unpickler grow its memo table (4 GiB)."""
    import base64
    import struct
    import zlib

    text = json.dumps(STDIN_PRIVATE)
    body = b"\x80\x04\x8c" + bytes([len(text)]) + text.encode()
    body += b"r" + struct.pack("<I", 1 << 24) + b"."  # 256 MiB of memo table, unvetted
    field = base64.b64encode(zlib.compress(body)).decode()
    rows = [lcb_row("bomb", public=STDIN_PUBLIC, private=[], private_text=field)]
    path = write_parquet(rows, tmp_path / "bomb.parquet")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"livecodebench:{path}")
    message = str(info.value)
    assert message.startswith(f"{path}: row 1 (id bomb): column 'private_test_cases': the pickle")
    assert "memo index 16777216" in message and "\n" not in message


@pytest.mark.parametrize("column", ["public", "private"])
def test_a_row_with_more_tests_than_the_cap_is_refused_naming_it(
    tmp_path: Path, column: str
) -> None:
    """Issue 31 (low): counted while the test list is parsed, not after it is built."""
    many = [STDIN_PRIVATE[0]] * 10_001
    tests = {"public": STDIN_PUBLIC, "private": STDIN_PRIVATE, column: many}
    rows = [lcb_row("many", public=tests["public"], private=tests["private"])]
    path = write_parquet(rows, tmp_path / "many.parquet")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"livecodebench:{path}")
    message = str(info.value)
    assert message.startswith(f"{path}: row 1 (id many): column '{column}_test_cases'")
    assert "more than 10000 tests" in message and "\n" not in message


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_the_real_private_format_loads_whatever_protocol_wrote_it(
    tmp_path: Path, protocol: int
) -> None:
    text = _pickled(json.dumps(STDIN_PRIVATE), protocol)
    row = lcb_row("abc1", public=STDIN_PUBLIC, private=[], private_text=text)
    path = write_parquet([row], tmp_path / "p.parquet")
    (record,) = load_dataset_spec(f"livecodebench:{path}").records
    tests = code_tests_of(record.ground_truth)
    assert tests is not None
    assert [(t.input, t.public) for t in tests.tests] == [
        ("1 2\n", True),
        ("2 2\n", False),
        ("5 7\n", False),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"public_test_cases": "[{"}, "column 'public_test_cases' is not JSON"),
        (
            {
                "metadata": "{}",
                "public_test_cases": json.dumps(
                    [{"input": "[1]", "output": "1", "testtype": "functional"}]
                ),
            },
            "func_name",
        ),
        (
            {"public_test_cases": json.dumps([{"input": "1", "testtype": "stdin"}])},
            "public_test_cases[0] has no 'output'",
        ),
        (
            {
                "private_test_cases": lcb_private(
                    [{"input": "1", "output": "1", "testtype": "batch"}]
                )
            },
            "unknown test type 'batch'",
        ),
        ({"contest_date": "soon"}, "contest_date 'soon' is not a date"),
    ],
    ids=[
        "public-not-json",
        "functional-without-name",
        "test-without-output",
        "bad-testtype",
        "bad-date",
    ],
)
def test_malformed_rows_are_one_line_errors(
    tmp_path: Path, change: dict[str, str], message: str
) -> None:
    row = {**lcb_row("q9", public=STDIN_PUBLIC, private=STDIN_PRIVATE), **change}
    path = write_parquet([row], tmp_path / "bad.parquet")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec(f"livecodebench:{path}", since=date(2020, 1, 1))
    assert str(info.value).startswith(f"{path}: row 1 (id q9): ")
    assert message in str(info.value)


def test_by_name_reads_the_hub_repository_files_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``livecodebench`` fetches test*.jsonl with hf_hub_download; offline, from the hub cache."""
    from huggingface_hub import constants

    rows = _rows()
    files = {name: "" for name in LIVECODEBENCH_FILES}
    files["test.jsonl"] = json.dumps(rows[0]) + "\n"
    files["test6.jsonl"] = json.dumps(rows[1]) + "\n"
    seed_hub_files(files, "livecodebench/code_generation_lite", tmp_path / "hub")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = load_dataset_spec("livecodebench")
    assert [r.id for r in loaded.records] == ["abc380_a", "two-sum"]
    assert loaded.benchmark == "livecodebench"
    assert loaded.source == "livecodebench"


def test_by_name_offline_without_a_cache_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetError) as info:
        load_dataset_spec("livecodebench")
    assert str(info.value).startswith(
        "hf:livecodebench/code_generation_lite/test.jsonl: cannot fetch"
    )
    assert "\n" not in str(info.value)


def test_a_clone_of_the_hub_repository_reads_its_files_not_its_script(tmp_path: Path) -> None:
    clone = tmp_path / "code_generation_lite"
    clone.mkdir()
    (clone / "code_generation_lite.py").write_text("raise SystemExit('a loading script ran')\n")
    rows = _rows()
    (clone / "test.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (clone / "test5.jsonl").write_text(json.dumps(rows[1]) + "\n")
    loaded = load_dataset_spec(f"livecodebench:{clone}")
    assert [r.id for r in loaded.records] == ["abc380_a", "two-sum"]
