"""The run's records: what a trajectory and a result say, and that they survive JSON.

results.jsonl, ``pacore run --json`` and the RL export all go through
``to_dict``/``from_dict``; a checkpoint round trip turns tuples into lists.
These tests build records by hand and read them back, so a field that is
dropped, renamed or left a list fails here rather than in a resumed run.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from typing import Any

import pytest

from pacore_graph.values.records import PaCoReResult, ToolCallRecord, Trajectory, trajectory_id


def full_trajectory(round_index: int, index: int, **overrides: Any) -> Trajectory:
    """A trajectory with every field set to something other than its default."""
    values: dict[str, Any] = {
        "round": round_index,
        "index": index,
        "content": f"thinking {round_index}.{index} \\boxed{{{index}}}",
        "reasoning": "hidden",
        "message": f"\\boxed{{{index}}}",
        "finish_reason": "stop",
        "prompt_tokens": 11,
        "completion_tokens": 7 + index,
        "latency_s": 0.25,
        "references": (0, 2),
        "tokens_estimated": True,
        "tool_calls": (
            ToolCallRecord(
                name="python", arguments={"code": "print(1)"}, output="1\n", latency_s=0.5
            ),
            ToolCallRecord(name="python", arguments={}, output="", error="time limit"),
        ),
        "logprobs": [{"token": "a", "logprob": -0.5}],
        "token_ids": (1, 2, 3),
        "artifacts": {"diff": "--- a\n+++ b\n"},
    }
    values.update(overrides)
    return Trajectory(**values)


def through_json(data: dict[str, Any]) -> Any:
    return json.loads(json.dumps(data))


def test_trajectory_round_trips_through_json_field_by_field() -> None:
    original = full_trajectory(1, 3)
    data = through_json(original.to_dict())
    assert data["id"] == trajectory_id(1, 3) == original.id
    assert (data["failed"], data["truncated"]) == (False, False)
    back = Trajectory.from_dict(data)
    for f in fields(Trajectory):  # every field, so a new one cannot be forgotten
        assert getattr(back, f.name) == getattr(original, f.name), f.name
    assert back == original


def test_failed_trajectory_is_recorded_as_failed_not_as_empty_text() -> None:
    failed = Trajectory(round=0, index=2, error="HTTP 500: upstream broke")
    assert failed.failed and failed.message is None
    data = failed.to_dict()
    assert data["failed"] is True and data["error"] == "HTTP 500: upstream broke"
    assert Trajectory.from_dict(through_json(data)).failed


def test_truncated_means_the_server_stopped_at_the_length_limit() -> None:
    assert full_trajectory(0, 0, finish_reason="length").truncated
    assert not full_trajectory(0, 0, finish_reason="stop").truncated


def test_lists_from_a_checkpoint_become_tuples_again() -> None:
    # msgpack gives back lists; records compare and hash as if they were never serialised.
    from_checkpoint = Trajectory(
        round=1,
        index=0,
        references=[0, 1],  # type: ignore[arg-type]
        token_ids=[5, 6],  # type: ignore[arg-type]
        tool_calls=[],  # type: ignore[arg-type]
    )
    assert from_checkpoint.references == (0, 1)
    assert from_checkpoint.token_ids == (5, 6)
    assert from_checkpoint.tool_calls == ()
    t = Trajectory(round=0, index=0, message="m")
    result = PaCoReResult(
        answer="m",
        reasoning=None,
        rounds=[[t]],  # type: ignore[arg-type]
        schedule=[1],  # type: ignore[arg-type]
    )
    assert result.rounds == ((t,),) and result.schedule == (1,)


def two_round_result(**extra: Any) -> PaCoReResult:
    round0 = (
        full_trajectory(0, 0),
        Trajectory(round=0, index=1, error="timeout", completion_tokens=4),
        full_trajectory(0, 2, finish_reason="length"),
    )
    final = (
        Trajectory(round=1, index=0, error="HTTP 500"),
        full_trajectory(1, 1, message="\\boxed{42}"),
    )
    return PaCoReResult(
        answer="42",
        reasoning="because",
        rounds=(round0, final),
        schedule=(3, 2),
        problem_id="p1",
        wall_s=1.23456,
        model="scripted",
        preset="low",
        extra=extra,
    )


def test_result_counts_are_derived_from_its_trajectories() -> None:
    result = two_round_result()
    everyone = [t for rnd in result.rounds for t in rnd]
    assert result.trajectories == tuple(everyone)
    assert result.ttc_per_round == tuple(
        sum(t.completion_tokens for t in rnd) for rnd in result.rounds
    )
    # failed calls count towards TTC when the server reported tokens for them
    assert result.ttc_per_round[0] == sum(t.completion_tokens for t in result.rounds[0])
    assert result.effective_ttc == sum(t.completion_tokens for t in everyone)
    assert result.failures == sum(1 for t in everyone if t.error is not None) == 2
    assert result.truncations == sum(1 for t in everyone if t.finish_reason == "length") == 1


def test_final_is_the_chosen_trajectory_else_the_first_that_did_not_fail() -> None:
    result = two_round_result()
    assert result.final is result.rounds[-1][1]  # r1.0 failed
    chosen = two_round_result(chosen=trajectory_id(1, 0))
    assert chosen.final is chosen.rounds[-1][0]
    all_failed = PaCoReResult(
        answer="",
        reasoning=None,
        rounds=((Trajectory(round=0, index=0, error="x"),),),
        schedule=(1,),
    )
    assert all_failed.final.failed  # the run says so rather than inventing an answer


@pytest.mark.parametrize("extra", [{}, {"chosen": "r1.1", "sampling": {"temperature": 0.3}}])
def test_result_round_trips_through_json(extra: dict[str, Any]) -> None:
    original = two_round_result(**extra)
    data = through_json(original.to_dict())
    assert data["effective_ttc"] == original.effective_ttc
    assert (data["failures"], data["truncations"]) == (original.failures, original.truncations)
    assert data["trajectories"] == len(original.trajectories)
    assert ("extra" in data) == bool(extra)
    back = PaCoReResult.from_dict(data)
    assert back.rounds == original.rounds
    for name in ("answer", "reasoning", "schedule", "problem_id", "model", "preset"):
        assert getattr(back, name) == getattr(original, name), name
    assert back.wall_s == round(original.wall_s, 4)
    assert dict(back.extra) == extra


def test_result_without_a_schedule_takes_the_round_widths() -> None:
    result = two_round_result()
    data = result.to_dict()
    del data["schedule"]
    assert PaCoReResult.from_dict(data).schedule == tuple(len(r) for r in result.rounds)


def test_a_result_keeps_its_conversation_apart_from_its_json() -> None:
    """The conversation rebuilds the prompts; a results line holds it once, as ``messages``."""
    talk = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6 x 7?"}]
    result = replace(two_round_result(), conversation=talk)  # type: ignore[arg-type]
    assert result.conversation == tuple(talk)  # a list (a checkpoint's) becomes a tuple
    data = result.to_dict()
    assert "conversation" not in data
    assert PaCoReResult.from_dict(data).conversation == ()
    assert PaCoReResult.from_dict({**data, "conversation": talk}).conversation == tuple(talk)
