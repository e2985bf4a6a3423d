"""cli/data: ``pacore data`` writes a generated dataset, or refuses in one line and writes none.

The command runs in-process through ``main``; the file is read back with the
project's one JSONL reader, so what is checked is what ``pacore run --input``
and ``pacore eval`` would read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pacore_graph.cli import EXIT_USAGE, main
from pacore_graph.runs.jsonl import JsonLine, read_lines


def test_the_dataset_has_n_problems_and_the_same_seed_writes_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, again, other = (tmp_path / name for name in ("a.jsonl", "b.jsonl", "c.jsonl"))
    assert main(["data", "easy-arithmetic", "--n", "5", "--seed", "3", "--out", str(first)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 5 easy-arithmetic problems to {first}"
    assert main(["data", "easy-arithmetic", "--n", "5", "--seed", "3", "--out", str(again)]) == 0
    assert main(["data", "easy-arithmetic", "--n", "5", "--seed", "4", "--out", str(other)]) == 0
    assert first.read_bytes() == again.read_bytes() != other.read_bytes()
    lines = list(read_lines(first))
    assert all(isinstance(line, JsonLine) for line in lines)
    ids = {line.data["id"] for line in lines if isinstance(line, JsonLine)}
    assert len(lines) == len(ids) == 5


@pytest.mark.parametrize("n", ["0", "-2"])
def test_a_bad_count_is_a_usage_error_and_no_file(
    n: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d.jsonl"
    assert main(["data", "arithmetic", "--n", n, "--out", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and "\n" not in err
    assert "must be an integer >= 1" in err
    assert not out.exists()


def test_an_unknown_kind_is_refused_by_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["data", "geometry", "--out", str(tmp_path / "d.jsonl")])
    assert caught.value.code == EXIT_USAGE
    assert "invalid choice: 'geometry'" in capsys.readouterr().err
