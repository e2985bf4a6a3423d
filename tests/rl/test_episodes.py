"""Episode records and ``pacore export-episodes``.

Results come from real graph runs (``pacore run --input`` through the runner,
``pacore eval`` through the harness) against an in-process fake model that
answers by input: arithmetic problems, answered right or wrong by the
explorer's seed, one explorer per problem failing. The fake records every
prompt it was sent, so the test can check that each episode's prompt is
*exactly* what the model saw, rebuilt from the results file alone.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any

import pytest
from rl_support import (
    PROBLEMS,
    WIDTH,
    make_run_results,
    problem_text,
    question,
    write_logprob_run,
)

from pacore_graph.eval.graders import MathGrader
from pacore_graph.rl import RLDependencyError, require_rl
from pacore_graph.rl.episodes import (
    EPISODE_SCHEMA_VERSION,
    Episode,
    chat_message,
    episodes_from_run,
    read_result_runs,
    split_logprobs,
)

# --------------------------------------------------------------------------- episodes


async def test_episode_prompts_are_exactly_what_the_model_was_sent(tmp_path: Path) -> None:
    results, client = await make_run_results(tmp_path)
    sent: dict[tuple[str, int], list[dict[str, str]]] = {}
    for call in client.calls:
        sent[(problem_text(call), call.seed or 0)] = [chat_message(m) for m in call.messages]
    runs, skipped = read_result_runs(results)
    assert skipped == []
    assert sorted(r.problem_id for r in runs) == sorted(PROBLEMS)
    checked = 0
    for run in runs:
        for ep in episodes_from_run(run):
            seed = 1000 * ep.round + ep.index
            assert list(ep.prompt) == sent[(question(run.problem_id), seed)], ep.trajectory_id
            checked += 1
    # per problem: 4 explorers (one failed) + the final synthesis
    assert checked == len(PROBLEMS) * WIDTH


async def test_episode_fields_rewards_and_references(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    runs, _ = read_result_runs(results)
    run = next(r for r in runs if r.problem_id == "p2")
    episodes = {e.trajectory_id: e for e in episodes_from_run(run)}
    assert sorted(episodes) == ["r0.0", "r0.2", "r0.3", "r1.0"]  # r0.1 failed: no episode

    right, wrong, final = episodes["r0.0"], episodes["r0.3"], episodes["r1.0"]
    assert right.reward == 1.0 and right.grade_extracted == "17"
    assert wrong.reward == 0.0 and wrong.grade_expected == "17"
    assert right.message == "Explorer 0: \\boxed{17}." and right.completion.startswith("<think>")
    assert right.reasoning == "reasoning of seed 0"
    assert right.input_message_ids == () and right.prompt[-1]["content"] == "What is 10 + 7?"
    assert right.prompt[0] == {"role": "system", "content": "Be brief."}
    assert (right.final_round, final.final_round) == (False, True)
    assert right.completion_tokens == 5 and wrong.completion_tokens == 8
    assert right.finish_reason == "stop" and right.model == "fake-model"
    assert right.schedule == (WIDTH, 1) and right.preset == "low"
    assert right.grader == "math" and right.category == "math"
    assert right.ground_truth == {"answer": "17"}
    assert right.run_id == run.run_id and right.episode_id == f"{run.run_id}:r0.0"
    assert right.schema_version == EPISODE_SCHEMA_VERSION

    # the final round read the three surviving messages, in the order the graph chose
    refs = run.result.rounds[1][0].references
    assert final.input_message_ids == tuple(f"r0.{i}" for i in refs)
    assert sorted(final.input_message_ids) == ["r0.0", "r0.2", "r0.3"]
    body = final.prompt[-1]["content"]
    positions = [body.index(episodes[i].message) for i in final.input_message_ids]
    assert positions == sorted(positions)
    assert "read 3 references" in final.completion
    assert final.reward == 1.0

    # the reward is the grader's score of the compacted message, not of the raw text
    grader = MathGrader()
    for ep in episodes.values():
        assert ep.reward == grader.grade(ep.message, {"answer": "17"}).score


async def test_explicit_grader_and_missing_ground_truth(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    runs, _ = read_result_runs(results)
    run = runs[0]

    class Always:
        name = "always"

        def grade(self, response: str, ground_truth: Any) -> Any:
            return MathGrader().grade("\\boxed{1}", "1")

    eps = episodes_from_run(run, grader=Always())
    assert {e.reward for e in eps} == {1.0} and {e.grader for e in eps} == {"always"}

    no_truth = replace(run, ground_truth=None)
    eps = episodes_from_run(no_truth)
    assert {e.reward for e in eps} == {None} and {e.grader for e in eps} == {None}


def test_episode_is_frozen_validated_and_round_trips() -> None:
    ep = Episode(
        episode_id="run:r1.0",
        run_id="run",
        problem_id="p",
        round=1,
        index=0,
        trajectory_id="r1.0",
        final_round=True,
        input_message_ids=("r0.1", "r0.0"),
        prompt=({"role": "user", "content": "x"},),
        completion="c",
        message="m",
        reward=0.5,
        ground_truth={"answer": "3", "tests": [1, 2]},
        sampling={"temperature": 1.0},
        token_ids=(1, 2),
        logprobs=(-0.1, -0.2),
        logprob_tokens=("a", "b"),
    )
    with pytest.raises(FrozenInstanceError):
        ep.reward = 1.0  # type: ignore[misc]
    row = ep.to_row()
    assert {"problem_id", "round", "prompt", "completion", "message", "reward"} <= set(row)
    assert row["ground_truth"] == '{"answer": "3", "tests": [1, 2]}'
    assert row["input_message_ids"] == ["r0.1", "r0.0"]
    assert Episode.from_row(json.loads(json.dumps(row))) == ep
    with pytest.raises(ValueError, match="reward"):
        replace(ep, reward=1.5)
    with pytest.raises(ValueError, match="newer"):
        Episode.from_row({**row, "schema_version": EPISODE_SCHEMA_VERSION + 1})


def test_split_logprobs_shapes() -> None:
    openai_shape = {
        "content": [
            {"token": "4", "logprob": -0.25, "bytes": [52], "top_logprobs": []},
            {"token": "2", "logprob": -1.5, "bytes": [50], "top_logprobs": []},
        ]
    }
    assert split_logprobs(openai_shape) == ((-0.25, -1.5), ("4", "2"))
    assert split_logprobs([-0.5, -1]) == ((-0.5, -1.0), None)
    assert split_logprobs(None) == (None, None)
    assert split_logprobs({"content": None}) == (None, None)
    assert split_logprobs([{"token": "x"}]) == (None, None)


def test_token_ids_logprobs_and_sampling_are_kept(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    write_logprob_run(results)
    runs, _ = read_result_runs(results)
    eps = {e.trajectory_id: e for e in episodes_from_run(runs[0])}
    assert sorted(eps) == ["r0.0", "r1.0"]
    first, final = eps["r0.0"], eps["r1.0"]
    assert first.token_ids == (19, 20)
    assert first.logprobs == (-0.5, -0.1) and first.logprob_tokens == ("4", "2")
    assert first.sampling == {"temperature": 0.7, "logprobs": True}
    assert first.run_id == "abc" and first.episode_id == "abc:r0.0"
    assert final.token_ids is None and final.logprobs is None
    assert final.truncated and final.finish_reason == "length"
    assert final.reward == 0.0 and first.reward == 1.0
    assert final.input_message_ids == ("r0.0",)
    assert "Reference 1:\n42" in final.prompt[-1]["content"]


# --------------------------------------------------------------------------- packaging


def test_import_does_not_pull_heavy_dependencies() -> None:
    code = (
        "import sys, pacore_graph.rl as rl\n"
        "import pacore_graph.rl.episodes, pacore_graph.rl.export, pacore_graph.rl.recipe\n"
        "import pacore_graph.rl.rewards, pacore_graph.rl.train, pacore_graph.rl.tiny\n"
        "values = [getattr(rl, name) for name in rl.__all__]\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'datasets') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_missing_extra_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real: Callable[..., Any] = importlib.util.find_spec

    def fake_find_spec(name: str, *args: Any) -> Any:
        return None if name in ("trl", "datasets") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(RLDependencyError, match=r"trl, datasets.*pacore-graph\[rl\]"):
        require_rl("torch", "trl", "datasets")
    assert issubclass(RLDependencyError, ImportError)
