"""Writing dataset rows: the format is checked first, JSONL is atomic and needs no extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.rl.rows import ROW_FORMATS, check_row_format, write_jsonl, write_rows

ROWS = [{"id": "a", "text": "caf\u00e9", "n": 1}, {"id": "b", "text": "line\nbreak", "n": 2}]


def _no_features() -> Any:
    raise AssertionError("jsonl must not build datasets features")


@pytest.mark.parametrize("fmt", ["csv", "JSONL", ""])
def test_an_unknown_format_names_the_choices(fmt: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_row_format(fmt)
    message = str(caught.value)
    assert repr(fmt) in message and "\n" not in message
    assert all(known in message for known in ROW_FORMATS)


def test_jsonl_rows_come_back_as_written_one_per_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, ROWS)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(ROWS)
    assert [json.loads(line) for line in lines] == ROWS
    assert "caf\u00e9" in lines[0]  # written as UTF-8, not \u escapes


def test_write_rows_puts_jsonl_in_the_folder_or_the_file(tmp_path: Path) -> None:
    named = dict(jsonl_name="rows.jsonl", parquet_name="rows.parquet", features=_no_features)
    into_folder = write_rows(ROWS, "jsonl", tmp_path / "out", **named)  # type: ignore[arg-type]
    assert into_folder == tmp_path / "out" / "rows.jsonl"
    to_file = write_rows(ROWS, "jsonl", tmp_path / "out", file=tmp_path / "x.jsonl", **named)  # type: ignore[arg-type]
    assert to_file == tmp_path / "x.jsonl"
    for path in (into_folder, to_file):
        assert [json.loads(x) for x in path.read_text().splitlines()] == ROWS


def test_an_unknown_format_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown format"):
        write_rows(
            ROWS,
            "csv",
            tmp_path / "out",
            jsonl_name="r.jsonl",
            parquet_name="r.parquet",
            features=_no_features,
        )
    assert not (tmp_path / "out").exists()


def test_jsonl_does_not_import_datasets(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom pacore_graph.rl.rows import write_rows\n"
        f"write_rows([{{'a': 1}}], 'jsonl', Path({str(tmp_path)!r}), jsonl_name='r.jsonl',"
        " parquet_name='r.parquet', features=lambda: 1 / 0)\n"
        "print('datasets' in sys.modules, 'pyarrow' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]
    assert json.loads((tmp_path / "r.jsonl").read_text()) == {"a": 1}
