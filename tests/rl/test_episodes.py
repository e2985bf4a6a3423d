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
    FAILING_SEED,
    PROBLEMS,
    SYNTHESIS_START,
    WIDTH,
    answer_of,
    config,
    make_run_results,
    problem_text,
    question,
    records,
    write_logprob_run,
)

from pacore_graph import build_pacore_graph
from pacore_graph.eval.graders import MathGrader
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.rl import RLDependencyError, episodes_from_results, require_rl
from pacore_graph.rl.episodes import (
    EPISODE_SCHEMA_VERSION,
    Episode,
    chat_message,
    episodes_from_run,
    read_result_runs,
    split_logprobs,
)
from pacore_graph.rl.export import export_episodes
from pacore_graph.runs.runner import DatasetRecord, result_line
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.records import PaCoReResult, Trajectory

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


# ------------------------------------------------------------- episodes_from_results


def scripted_arithmetic(req: ScriptedRequest) -> ScriptedReply:
    """By input: explorers right for even seeds, wrong for odd, seed 1 fails; synthesis right."""
    total = answer_of(problem_text_of(req.last_user))
    if req.last_user.startswith(SYNTHESIS_START):
        return ScriptedReply(content=f"So the sum is \\boxed{{{total}}}.", reasoning="read them")
    seed = req.seed or 0
    value = total if seed % 2 == 0 else total + 1
    return ScriptedReply(content=f"Explorer {seed}: \\boxed{{{value}}}.", reasoning=f"seed {seed}")


def problem_text_of(text: str) -> str:
    if text.startswith(SYNTHESIS_START):
        return text.split("Original Problem:\n", 1)[1].split("\n\nReference Responses:", 1)[0]
    return text


async def graph_outputs() -> list[dict[str, Any]]:
    """Each problem through a real PaCoRe graph (scripted server over HTTP), its whole output."""
    fail = lambda req: 500 if req.seed == FAILING_SEED else None  # noqa: E731
    async with ScriptedServer(scripted_arithmetic, fail_when=fail) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1)
        )
        graph = build_pacore_graph(client, config=config((WIDTH, 2)), tracing=False)
        try:
            return [
                await graph.ainvoke({"messages": list(r.messages), "problem_id": r.id})
                for r in plain_records()
            ]
        finally:
            await client.aclose()


def plain_records() -> list[DatasetRecord]:
    """The problems as a run's input (no category: a graph's results carry none)."""
    return [replace(r, raw={}) for r in records()]


async def test_episodes_from_results_are_the_export_of_the_same_results(tmp_path: Path) -> None:
    outputs = await graph_outputs()
    results = [out["result"] for out in outputs]
    assert all(r.failures == 1 for r in results)  # explorer 1 failed: recorded, not an episode
    # The same results written as `pacore run --input` writes them, then exported.
    file = tmp_path / "results.jsonl"
    lines = [result_line(rec, res) for rec, res in zip(plain_records(), results, strict=True)]
    file.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    export_episodes(file, tmp_path / "out", "jsonl")
    exported = [
        json.loads(line)
        for line in (tmp_path / "out" / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    truths = {rec.id: rec.ground_truth for rec in plain_records()}
    direct = [e.to_row() for e in episodes_from_results(outputs, ground_truths=truths)]
    assert direct == exported
    # 3 problems x (4 explorers - 1 failed + 2 + the answer), graded against the truths.
    assert len(direct) == len(PROBLEMS) * (WIDTH - 1 + 2 + 1)
    assert {row["reward"] for row in direct} == {0.0, 1.0}
    assert {row["round"] for row in direct} == {0, 1, 2}
    # A result that carries its conversation needs nothing else, and a run given twice counts once.
    carried = [
        replace(out["result"], conversation=tuple(rec.messages))
        for out, rec in zip(outputs, plain_records(), strict=True)
    ]
    again = episodes_from_results([*carried, carried[0]], ground_truths=truths)
    assert [e.to_row() for e in again] == exported
    ungraded = episodes_from_results(outputs)
    assert {e.reward for e in ungraded} == {None}
    assert [e.prompt for e in ungraded] == [e.prompt for e in again]


async def test_a_graph_result_alone_makes_episodes() -> None:
    """The finalize step records the problem conversation: a result needs no output around it."""
    outputs = await graph_outputs()
    results = [out["result"] for out in outputs]
    asked = [tuple(r.messages) for r in plain_records()]
    assert [tuple(r.conversation) for r in results] == asked
    alone = episodes_from_results(results)
    assert alone and alone == episodes_from_results(outputs)


def test_results_without_their_conversation_are_refused_clearly() -> None:
    bare = PaCoReResult(
        answer="5",
        reasoning=None,
        rounds=((Trajectory(round=0, index=0, content="5", message="5"),),),
        schedule=(1,),
        extra={"run_id": "r-1"},
    )
    with pytest.raises(ValueError, match=r"run r-1\) carries no conversation.*whole output"):
        episodes_from_results([bare])
    with pytest.raises(TypeError, match=r"results\[0\] is str"):
        episodes_from_results(["not a result"])  # type: ignore[list-item]
    talk = ({"role": "user", "content": "What is 2 + 3?"},)
    (episode,) = episodes_from_results([replace(bare, conversation=talk)])
    assert episode.run_id == "r-1" and episode.problem_id == "r-1"
    assert list(episode.prompt) == [{"role": "user", "content": "What is 2 + 3?"}]
