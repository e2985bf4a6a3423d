"""Message pools: PaCoRe-Train records and our own results files, read into ``PoolProblem``s.

The recipe samples message sets from these pools; what a pool holds (the
compacted messages, the ground truth, the category) is decided here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rl_support import (
    FAILING_SEED,
    POOL,
    PROBLEMS,
    WIDTH,
    answer_of,
    make_run_results,
    question,
    train_record,
    write_json_list,
    write_jsonl,
)

from pacore_graph.rl.pool import load_pool, pool_from_results, read_pacore_train


def test_read_pacore_train_compacts_responses(tmp_path: Path) -> None:
    record = train_record("a", 3, category="math")
    record["responses"].append({"content": "Object answer", "reasoning_content": "long thought"})
    record["responses"].append("")  # an empty response is no message
    as_list = read_pacore_train(write_json_list(tmp_path / "train.json", [record]))
    as_lines = read_pacore_train(write_jsonl(tmp_path / "train.jsonl", [record]))
    assert as_list == as_lines
    (problem,) = as_list
    assert problem.problem_id == "a" and problem.category == "math"
    assert len(problem.messages) == POOL + 1
    assert problem.messages[0] == "Response 0: \\boxed{42}"  # after the last </think>
    assert problem.messages[-1] == "Object answer"
    assert problem.ground_truth == {"answer": "42"}


def test_read_pacore_train_rejects_bad_records(tmp_path: Path) -> None:
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"conversation": "text", "responses": []}])
    with pytest.raises(ValueError, match=r"bad.jsonl:1: 'conversation'"):
        read_pacore_train(bad)
    dup = write_jsonl(tmp_path / "dup.jsonl", [train_record("x", 1), train_record("x", 2)])
    with pytest.raises(ValueError, match="duplicate id 'x'"):
        read_pacore_train(dup)


# --------------------------------------------------------------------------- stage 1


async def test_a_results_file_pools_the_round0_messages_that_answered(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    problems = {p.problem_id: p for p in pool_from_results(results)}
    assert sorted(problems) == sorted(PROBLEMS)
    answered = [i for i in range(WIDTH) if i != FAILING_SEED]  # round 0's seeds are 0..WIDTH-1
    for pid, problem in problems.items():
        assert problem.ground_truth == {"answer": str(answer_of(question(pid)))}
        assert problem.conversation[-1]["content"] == question(pid)
        # one message per round-0 explorer that answered, in explorer order
        indices = [int(m.split(":")[0].removeprefix("Explorer ")) for m in problem.messages]
        assert indices == answered
    assert load_pool(results) == list(pool_from_results(results))


def test_load_pool_tells_a_results_file_from_a_pacore_train_file(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", [train_record("t", 2)])
    (problem,) = load_pool(train)
    assert problem.problem_id == "t" and len(problem.messages) == POOL
    assert load_pool(train) == read_pacore_train(train)


def test_a_missing_pool_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"absent\.jsonl does not exist"):
        load_pool(tmp_path / "absent.jsonl")
