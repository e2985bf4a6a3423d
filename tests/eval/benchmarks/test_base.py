"""The adapters' shared readers: a cell as text, a day from any date form."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from pacore_graph.eval.benchmarks.base import cell_text, parse_day


def test_cell_text() -> None:
    assert cell_text({"a": "x"}, "a") == "x"
    assert cell_text({"a": 12}, "a") == "12"
    assert cell_text({"a": ""}, "a", allow_empty=True) == ""
    with pytest.raises(ValueError, match="column 'a' is empty"):
        cell_text({"a": "  "}, "a")
    with pytest.raises(ValueError, match="column 'a' is NoneType, not text"):
        cell_text({}, "a")
    with pytest.raises(ValueError, match="column 'a' is bool"):
        cell_text({"a": True}, "a")


@pytest.mark.parametrize(
    "value",
    [
        "2024-08-01",
        "2024-08-01T00:00:00",
        "2024-08-01T23:59:59",
        date(2024, 8, 1),
        datetime(2024, 8, 1, 5),
    ],
)
def test_parse_day(value: object) -> None:
    assert parse_day(value, "contest_date") == date(2024, 8, 1)


def test_parse_day_refuses_what_is_not_a_date() -> None:
    with pytest.raises(ValueError, match="contest_date 12 is not a date"):
        parse_day(12, "contest_date")
