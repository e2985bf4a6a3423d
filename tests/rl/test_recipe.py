"""The paper's training-set recipe: message pools, |M| ~ U(lo, hi), stage-1/2 filters."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rl_support import (
    POOL,
    PROBLEMS,
    ArithmeticModel,
    config,
    make_run_results,
    require_extra,
    train_record,
    write_jsonl,
)

from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import parse_methods
from pacore_graph.rl.recipe import (
    DEFAULT_THRESHOLDS,
    PoolProblem,
    RecipeConfig,
    build_trainset,
    build_trainset_command,
    load_pool,
    load_synthesis_scores,
    pool_from_results,
)
from pacore_graph.rl.rewards import decode_ground_truth
from pacore_graph.runs.runner import read_dataset
from pacore_graph.testing.fake_client import FakeChatClient
from pacore_graph.values.prompts import synthesis_messages


def pool_of(pid: str, right: int, category: str | None = None) -> PoolProblem:
    """A problem whose 24 messages hold ``right`` correct answers."""
    return PoolProblem(
        problem_id=pid,
        conversation=({"role": "user", "content": f"Problem {pid}: what is 6 * 7?"},),
        messages=tuple(f"Response {i}: \\boxed{{{42 if i < right else i}}}" for i in range(POOL)),
        ground_truth={"answer": "42"},
        category=category,
    )


def test_stage1_keeps_pools_strictly_between_zero_and_threshold() -> None:
    problems = [
        pool_of("none", 0),  # majority voting has nothing to find: dropped
        pool_of("hard", 5),  # 5/24 < 9/24: kept
        pool_of("edge", 9),  # 9/24 is not < 9/24: dropped (strict)
        pool_of("easy", 12),  # dropped
        pool_of("code-mid", 12, "code"),  # 12/24 < 15/24 for code: kept
        pool_of("code-edge", 15, "coding"),  # coding counts as code; 15/24 dropped
    ]
    result = build_trainset(problems, RecipeConfig(seed=1))
    kept = {s.problem_id for s in result.problems if s.stage1_kept}
    assert kept == {"hard", "code-mid"}
    accuracy = {s.problem_id: s.pool_accuracy for s in result.problems}
    assert accuracy["hard"] == pytest.approx(5 / 24) and accuracy["edge"] == pytest.approx(9 / 24)
    thresholds = {s.problem_id: s.threshold for s in result.problems}
    assert thresholds["code-edge"] == DEFAULT_THRESHOLDS["code"] == 15 / 24
    assert thresholds["hard"] == DEFAULT_THRESHOLDS["math"] == 9 / 24
    report = result.report
    assert (report.problems, report.stage1_kept) == (6, 2)
    assert (report.stage1_none_right, report.stage1_too_easy) == (1, 3)
    assert not report.stage2_applied and report.stage2_kept is None
    assert report.rows == 2 and {r["problem_id"] for r in result.rows} == kept
    text = str(report)
    assert "stage 1 (0 < pool accuracy < threshold): kept 2" in text
    assert "stage 2: not applied" in text


def test_problems_without_truth_or_pool_are_dropped() -> None:
    no_truth = PoolProblem(
        problem_id="nt", conversation=({"role": "user", "content": "q"},), messages=("a",)
    )
    empty = PoolProblem(
        problem_id="e",
        conversation=({"role": "user", "content": "q"},),
        messages=(),
        ground_truth="1",
    )
    result = build_trainset([no_truth, empty, pool_of("ok", 1)])
    assert (result.report.no_ground_truth, result.report.empty_pool) == (1, 1)
    assert result.report.stage1_kept == 1
    reasons = {s.problem_id: s.dropped_because for s in result.problems}
    assert reasons == {"nt": "no ground truth", "e": "empty pool", "ok": None}


# --------------------------------------------------------------------------- prompts


def test_message_sets_are_uniform_in_range_and_rendered_like_the_graph() -> None:
    problem = pool_of("hard", 5)
    cfg = RecipeConfig(prompts_per_problem=300, seed=7)
    result = build_trainset([problem], cfg)
    sizes = Counter(r["num_messages"] for r in result.rows)
    assert set(sizes) == set(range(16, 25))  # every size of U(16, 24) drawn, nothing else
    assert max(sizes.values()) < 3 * min(sizes.values())  # roughly uniform
    for row in result.rows[:20]:
        chosen = row["message_indices"]
        assert len(chosen) == len(set(chosen)) == row["num_messages"]
        expected = synthesis_messages(problem.conversation, [problem.messages[i] for i in chosen])
        assert row["prompt"] == expected
        body = row["prompt"][-1]["content"]
        assert len(re.findall(r"^Reference \d+:$", body, flags=re.M)) == row["num_messages"]
        assert decode_ground_truth(row["ground_truth"]) == {"answer": "42"}
        assert row["category"] is None and row["pool_accuracy"] == pytest.approx(5 / 24)
    assert len({r["prompt_id"] for r in result.rows}) == 300
    assert result.report.capped_prompts == 0


def test_sampling_is_reproducible_by_seed_and_independent_of_other_problems() -> None:
    a, b = pool_of("a", 3), pool_of("b", 4)
    cfg = RecipeConfig(prompts_per_problem=5, seed=11)
    first = build_trainset([a, b], cfg).rows
    again = build_trainset([a, b], cfg).rows
    alone = build_trainset([a], cfg).rows
    other_seed = build_trainset([a, b], RecipeConfig(prompts_per_problem=5, seed=12)).rows
    assert first == again
    assert [r for r in first if r["problem_id"] == "a"] == list(alone)
    assert [r["message_indices"] for r in first] != [r["message_indices"] for r in other_seed]


def test_configurable_range_and_small_pools_are_capped() -> None:
    problem = pool_of("hard", 5)
    rows = build_trainset([problem], RecipeConfig(min_messages=8, max_messages=8)).rows
    assert [r["num_messages"] for r in rows] == [8]
    small = PoolProblem(
        problem_id="s",
        conversation=({"role": "user", "content": "What is 6 * 7?"},),
        messages=("\\boxed{42}", "\\boxed{41}", "\\boxed{40}", "\\boxed{39}"),
        ground_truth="42",
    )
    result = build_trainset([small], RecipeConfig(prompts_per_problem=3))
    assert [r["num_messages"] for r in result.rows] == [4, 4, 4]
    assert result.report.capped_prompts == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_messages": 0}, "min_messages"),
        ({"min_messages": 10, "max_messages": 9}, "min_messages"),
        ({"prompts_per_problem": 0}, "prompts_per_problem"),
        ({"thresholds": {"math": 0.0}}, "threshold"),
        ({"thresholds": {"code": 0.5}}, "'math'"),
        ({"compactor": "nope"}, "compactor"),
    ],
)
def test_recipe_config_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RecipeConfig(**kwargs)


# --------------------------------------------------------------------------- stage 2


def test_stage2_keeps_synthesis_accuracy_strictly_between_zero_and_one() -> None:
    problems = [pool_of(pid, 3) for pid in ("mixed", "wrong", "right", "unknown")]
    scores = {"mixed": [1.0, 0.0, 0.0], "wrong": [0.0, 0.0], "right": [1.0, 1.0]}
    result = build_trainset(problems, synthesis_scores=scores)
    report = result.report
    assert report.stage2_applied and report.stage2_kept == 1
    assert (report.stage2_all_wrong, report.stage2_all_right, report.stage2_no_results) == (1, 1, 1)
    assert {r["problem_id"] for r in result.rows} == {"mixed"}
    stats = {s.problem_id: s for s in result.problems}
    assert stats["mixed"].synthesis_accuracy == pytest.approx(1 / 3)
    assert stats["mixed"].synthesis_samples == 3 and stats["mixed"].stage2_kept
    assert stats["unknown"].stage2_kept is False
    assert "stage 2 (0 < synthesis accuracy < 1): kept 1" in str(report)


# --------------------------------------------------------------------------- our own runs


async def test_pool_from_our_runs_uses_round0_messages(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    problems = {p.problem_id: p for p in pool_from_results(results)}
    assert sorted(problems) == sorted(PROBLEMS)
    p2 = problems["p2"]
    # explorers 0, 2, 3 answered (1 failed); 0 and 2 right
    assert p2.messages == (
        "Explorer 0: \\boxed{17}.",
        "Explorer 2: \\boxed{17}.",
        "Explorer 3: \\boxed{18}.",
    )
    assert p2.ground_truth == {"answer": "17"} and p2.category == "math"
    assert p2.conversation[-1]["content"] == "What is 10 + 7?"
    assert load_pool(results) == list(pool_from_results(results))

    # 2/3 right: too easy for the paper's 9/24, kept with a looser threshold
    assert build_trainset(problems.values()).report.stage1_kept == 0
    loose = RecipeConfig(thresholds={"math": 0.9}, min_messages=2, max_messages=2)
    result = build_trainset(problems.values(), loose)
    assert result.report.stage1_kept == 3 and result.report.rows == 3
    assert all(r["num_messages"] == 2 for r in result.rows)


async def test_trainset_command_end_to_end_with_stage2(tmp_path: Path) -> None:
    pool = write_jsonl(
        tmp_path / "pool.jsonl",
        [
            train_record("hard", 4),
            train_record("easy", 20),
            train_record("mid", 2, question="what is 40 + 2?"),
        ],
    )
    out1 = tmp_path / "stage1"
    printed = io.StringIO()
    report = build_trainset_command([pool], out1, prompts_per_problem=2, seed=3, stream=printed)
    assert report.stage1_kept == 2 and report.rows == 4
    assert "stage 1 (0 < pool accuracy < threshold): kept 2" in printed.getvalue()
    rows = [json.loads(x) for x in (out1 / "trainset.jsonl").read_text().splitlines()]
    assert {r["problem_id"] for r in rows} == {"hard", "mid"}
    assert all(m.keys() == {"role", "content"} for r in rows for m in r["prompt"])
    saved = json.loads((out1 / "trainset_report.json").read_text())
    assert saved["rows"] == 4 and str(out1 / "trainset.jsonl") in saved["files"]
    stats = [json.loads(x) for x in (out1 / "problems.jsonl").read_text().splitlines()]
    assert [s["stage1_kept"] for s in stats] == [True, False, True]

    # the synthesis prompts as a pacore eval dataset: run them, then filter on the scores
    records, errors = read_dataset(out1 / "synthesis_eval.jsonl")
    assert errors == [] and len(records) == 4
    assert [dict(m) for m in records[0].messages] == rows[0]["prompt"]
    assert records[0].ground_truth == {"answer": "42"}
    client = FakeChatClient(reply=ArithmeticModel(), model="fake")
    outcome = await run_eval(
        records, parse_methods("single"), client, config=config(), out_dir=tmp_path / "syn",
        samples=2, progress=False,
    )  # fmt: skip
    scores = load_synthesis_scores(outcome.results)
    assert sorted(scores) == ["hard", "mid"]  # prompt ids hard#0, hard#1 count for "hard"
    assert all(len(v) == 4 for v in scores.values())  # 2 prompts x 2 samples

    out2 = tmp_path / "stage2"
    report2 = build_trainset_command(
        [pool], out2, prompts_per_problem=2, seed=3, synthesis_results=[outcome.results],
        stream=io.StringIO(),
    )  # fmt: skip
    # the fake model adds: right on "40 + 2" every time, wrong on "6 * 7" every time
    assert report2.stage2_applied and report2.stage2_kept == 0 and report2.rows == 0
    assert (report2.stage2_all_wrong, report2.stage2_all_right) == (1, 1)


def test_synthesis_scores_from_episode_rows(tmp_path: Path) -> None:
    rows = [
        {"problem_id": "a", "round": 0, "reward": 1.0},  # not a synthesis: ignored
        {"problem_id": "a", "round": 1, "reward": 0.0},
        {"problem_id": "a#2", "round": 2, "reward": 1.0},
        {"problem_id": "b", "round": 1, "reward": None},  # ungraded: ignored
        {"problem_id": "c", "score": 0.5, "method": "single"},
        {"problem_id": "d", "score": 1.0, "error": "boom"},  # failed run: ignored
    ]
    scores = load_synthesis_scores(write_jsonl(tmp_path / "s.jsonl", rows))
    assert scores == {"a": [0.0, 1.0], "c": [0.5]}


@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_trainset_loads_with_datasets_in_trl_format(tmp_path: Path, fmt: str) -> None:
    require_extra("datasets", "pyarrow")
    from datasets import load_dataset, load_from_disk

    pool = write_jsonl(tmp_path / "pool.jsonl", [train_record("hard", 4, category="math")])
    out = tmp_path / fmt
    build_trainset_command([pool], out, fmt=fmt, prompts_per_problem=3, stream=io.StringIO())
    if fmt == "parquet":
        ds = load_dataset("parquet", data_files=str(out / "trainset.parquet"), split="train")
    else:
        ds = load_from_disk(str(out))
    assert len(ds) == 3
    row = ds[0]
    assert row["prompt"][-1]["role"] == "user"
    assert row["prompt"][-1]["content"].startswith("You are given a problem")
    assert decode_ground_truth(row["ground_truth"]) == {"answer": "42"}
    assert (row["problem_id"], row["category"]) == ("hard", "math")
