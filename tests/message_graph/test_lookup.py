"""message_graph/lookup: one run's result found in a pacore run or pacore eval results file."""

from __future__ import annotations

from pathlib import Path

import pytest
from message_graph_support import (
    eval_line,
    run_line,
    scripted,
    wide,
    write_lines,
)

from pacore_graph.message_graph import (
    ResultLookupError,
    find_run,
    load_result,
)


def test_load_result_from_a_run_file(tmp_path: Path) -> None:
    good, other = scripted(), wide((3, 1))
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            {"request_id": "p1", "id": "p1", "error": "ModelCallError: down"},  # retried later
            run_line("p1", good, ground_truth={"answer": "42"}),
            run_line("p2", other),
            {"request_id": "p3", "id": "p3", "error": "RoundFailedError: all calls failed"},
            '{"request_id": "p4", "cut by an interrupt',
        ],
    )
    result, truth = load_result(path, "p1")
    assert result.rounds == good.rounds and result.problem_id == "p1"
    assert truth == {"answer": "42"}
    result2, truth2 = load_result(path, "p2")
    assert result2.schedule == (3, 1) and truth2 is None
    with pytest.raises(ResultLookupError, match=r"run of 'p3' failed: RoundFailedError"):
        load_result(path, "p3")
    with pytest.raises(ResultLookupError, match=r"no run of problem 'zz'.*'p1', 'p2', 'p3'"):
        load_result(path, "zz")
    with pytest.raises(FileNotFoundError, match="no results file"):
        load_result(tmp_path / "missing.jsonl", "p1")


def test_find_run_returns_the_problem_the_line_holds(tmp_path: Path) -> None:
    """The HTML page starts every prompt with the problem: ``messages``, else a question text."""
    convo = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6 x 7?"}]
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            {**run_line("p1", scripted()), "messages": convo},
            {**run_line("p2", scripted()), "question": "What is 2+2?"},
            run_line("p3", scripted()),
        ],
    )
    assert find_run(path, "p1").messages == convo
    assert find_run(path, "p2").messages == [{"role": "user", "content": "What is 2+2?"}]
    assert find_run(path, "p3").messages is None


def test_load_result_from_an_eval_file(tmp_path: Path) -> None:
    low, high = scripted(), wide((32, 4, 1))
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            eval_line("pacore:low", "p1", 0, low),
            eval_line("pacore:high", "p1", 0, high),
            eval_line("pacore:high", "p1", 1, None),
            eval_line("pacore:low", "p2", 0, wide((2, 1))),
        ],
    )
    with pytest.raises(ResultLookupError, match=r"several methods.*pacore:low, pacore:high"):
        load_result(path, "p1")
    result, truth = load_result(path, "p1", method="pacore:high")
    assert result.schedule == (32, 4, 1) and truth == {"answer": "42"}
    result, _ = load_result(path, "p2")  # one method: no need to name it
    assert result.schedule == (2, 1)
    with pytest.raises(ResultLookupError, match=r"sample 1\) failed: RoundFailedError"):
        load_result(path, "p1", method="pacore:high", sample=1)
    with pytest.raises(ResultLookupError, match=r"no sample 5; its samples: 0, 1"):
        load_result(path, "p1", method="pacore:high", sample=5)
    with pytest.raises(ResultLookupError, match=r"no run of method 'majority:4'.*pacore:low"):
        load_result(path, "p1", method="majority:4")
    with pytest.raises(ResultLookupError, match=r"available ids: 'p1', 'p2'"):
        load_result(path, "p9")


def test_load_result_reports_the_failed_sample_it_was_asked_for(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [eval_line("pacore:low", "p1", 1, None)])
    with pytest.raises(ResultLookupError, match=r"'p1' \(pacore:low, sample 1\) failed"):
        load_result(path, "p1", sample=1)
