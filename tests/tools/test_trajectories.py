"""The trajectory tools (tools/trajectories): what they show, and that every result is bounded."""

from __future__ import annotations

import json
import time

import pytest
from langchain_core.tools import BaseTool

from pacore_graph.tools.trajectories import (
    TrajectoryToolLimits,
    make_trajectory_tools,
    trajectory_text,
)
from pacore_graph.values.records import ToolCallRecord, Trajectory


def attempt(index: int, answer: int, lines: int = 3) -> Trajectory:
    reasoning = "\n".join(f"line {k}: carry the {k}" for k in range(lines))
    content = f"So the answer is \\boxed{{{answer}}}."
    return Trajectory(round=1, index=index, content=content, message=content, reasoning=reasoning)


ROUND = [
    attempt(2, 149),
    attempt(0, 148),
    Trajectory(round=1, index=1, error="UpstreamStatusError: HTTP 500 from the upstream"),
    attempt(3, 148, lines=200),
]


def tools(**limits: float) -> dict[str, BaseTool]:
    made = make_trajectory_tools(ROUND, TrajectoryToolLimits(**limits))  # type: ignore[arg-type]
    return {t.name: t for t in made}


def test_a_trajectory_reads_as_reasoning_tool_calls_and_answer() -> None:
    used = Trajectory(
        round=0,
        index=0,
        content="\\boxed{5}",
        reasoning="think",
        tool_calls=(
            ToolCallRecord(name="add", arguments={"b": 3, "a": 2}, output="5"),
            ToolCallRecord(name="div", arguments={}, output="", error="division by zero"),
        ),
    )
    assert trajectory_text(used) == (
        "## reasoning\nthink\n"
        '## tool call 1: add {"a": 2, "b": 3}\n5\n'
        "## tool call 2: div {}\nerror: division by zero\n"
        "## answer\n\\boxed{5}"
    )
    assert trajectory_text(ROUND[2]) == ""  # failed: no text, never an empty success


def test_the_list_tallies_the_answers_and_shows_failures() -> None:
    text = tools()["list_trajectories"].invoke({})
    head, *rows = text.splitlines()
    assert head == "4 trajectories, 1 failed. Answers (most common first): '148' x2, '149' x1."
    listed = [json.loads(r) for r in rows]
    assert [r["index"] for r in listed] == [0, 1, 2, 3]  # by index, whatever the order given
    assert listed[1] == {
        "index": 1,
        "failed": True,
        "error": "UpstreamStatusError: HTTP 500 from the upstream",
    }
    assert listed[3]["answer"] == "148" and listed[3]["lines"] == 203
    assert listed[3]["chars"] == len(trajectory_text(ROUND[3]))


def test_a_long_list_is_paged() -> None:
    many = [attempt(i, 100 + i % 3) for i in range(60)]
    (lister, *_) = make_trajectory_tools(many, TrajectoryToolLimits(max_result_chars=1000))
    first = lister.invoke({})
    assert len(first) <= 1000
    shown = len(first.splitlines()) - 2  # the tally line, the note
    assert first.endswith(f"more: call list_trajectories(start={shown})")
    rest = lister.invoke({"start": shown})
    assert json.loads(rest.splitlines()[1])["index"] == shown


def test_reads_by_characters_and_lines_are_cut_to_the_limit() -> None:
    reader = tools(max_result_chars=500)["read_trajectory"]
    text = trajectory_text(ROUND[3])
    first = reader.invoke({"index": 3})
    assert first.startswith(f"trajectory 3, characters 0-340 of {len(text)}:\n")
    assert first.endswith("[cut: read on with start=340]") and len(first) <= 500
    assert text[:340] in first
    end = reader.invoke({"index": 3, "start": len(text) - 40})
    assert end.endswith("So the answer is \\boxed{148}.")
    lines = reader.invoke({"index": 3, "start": 10, "end": 12, "unit": "lines"})
    assert (
        lines == "trajectory 3, lines 10-12 of 203:\nline 9: carry the 9\nline 10: carry the 10\n"
    )
    assert "unit='lines'" in reader.invoke({"index": 3, "start": 10, "unit": "lines"})
    assert reader.invoke({"index": 1}).startswith("trajectory 1 failed and has no text: ")
    assert "nothing in [9999" in reader.invoke({"index": 0, "start": 9999})
    with pytest.raises(ValueError, match="no trajectory 7; the indices are 0, 1, 2, 3"):
        reader.invoke({"index": 7})


def test_search_finds_text_or_patterns_and_bounds_its_hits() -> None:
    search = tools(max_hits=3)["search_trajectories"]
    found = search.invoke({"pattern": "BOXED{148}"})  # case-insensitive, not a pattern
    assert found.startswith("2 matches in 2 trajectories; showing 2:")
    assert "[0] line 5, char " in found and "[3] line 202, char " in found
    pattern = search.invoke({"pattern": r"carry the 1\d\b", "regex": True})
    assert pattern.startswith("10 matches in 1 trajectories; showing 3:")
    only = search.invoke({"pattern": "boxed", "indices": [2]})
    assert only.startswith("1 matches in 1 trajectories") and "[2]" in only
    assert search.invoke({"pattern": "absent"}) == "no match for 'absent' in 4 trajectories"
    with pytest.raises(ValueError, match="not a valid regular expression"):
        search.invoke({"pattern": "(", "regex": True})
    with pytest.raises(ValueError, match="longer than 200"):
        search.invoke({"pattern": "x" * 201})


def test_a_catastrophic_pattern_ends_as_an_error_not_a_stall() -> None:
    slow = [Trajectory(round=0, index=0, content="ab " * 2000)]
    (_, _, search) = make_trajectory_tools(slow, TrajectoryToolLimits(search_timeout_s=0.05))
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"longer than 0\.05s"):
        search.invoke({"pattern": "(.*a){12}x", "regex": True})
    assert time.monotonic() - started < 5


def test_limits_and_indices_are_checked() -> None:
    with pytest.raises(ValueError, match="max_result_chars"):
        TrajectoryToolLimits(max_result_chars=10)
    with pytest.raises(ValueError, match="snippet_chars"):
        TrajectoryToolLimits(snippet_chars=5)
    with pytest.raises(ValueError, match="distinct indices"):
        make_trajectory_tools([attempt(0, 1), attempt(0, 2)])
