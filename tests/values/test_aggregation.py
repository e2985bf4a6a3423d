"""Aggregators: answer extraction, majority vote (ties included), first answer, off the loop."""

from __future__ import annotations

import asyncio
import itertools
import random
import string
import threading
import time

import pytest
from vote_support import Recorded, loop_lag, slow_extract

from pacore_graph.values.aggregation import (
    Aggregator,
    FirstAnswer,
    MajorityVote,
    aggregate_off_loop,
    extract_final_answer,
    normalize_answer,
)
from pacore_graph.values.records import Trajectory


def traj(index: int, content: str, *, error: str | None = None, round_: int = 0) -> Trajectory:
    """A finished trajectory whose message is tagged with its index (to see which was chosen)."""
    return Trajectory(
        round=round_,
        index=index,
        content=content,
        message=None if error else f"message of {index}: {content}",
        error=error,
    )


# --------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A boxed answer beats any number, even one written after it.
        ("First 12 apples, so \\boxed{42}. Double-checked with 7 pears.", "42"),
        ("\\boxed{1} was wrong; the answer is \\boxed{2}", "2"),  # the last boxed one
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # nested braces stay balanced
        ("\\boxed{ 1,000 }", "1000"),
        # No boxed answer: the last number.
        ("We get 3, then 4, and finally 5.", "5"),
        ("The answer is 1,234,567.", "1234567"),  # thousands separators
        ("It is -17", "-17"),
        ("Roughly 3.50 metres", "3.5"),
        ("A share of 1/2", "1/2"),
        # Think tags are ignored: only the conclusion after the last </think> counts.
        ("<think>maybe \\boxed{99} or 100</think>So it is 7", "7"),
        ("<think>a</think><think>88</think>Final: 6", "6"),
        # No number at all: the last non-empty line.
        ("<think>12</think>Some words\n\nYes \n", "Yes"),
    ],
)
def test_extract_final_answer(text: str, expected: str) -> None:
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize(
    "text", ["", "   \n  ", "<think>the answer is 5</think>", "<think>x</think>\n"]
)
def test_nothing_to_extract_is_none(text: str) -> None:
    assert extract_final_answer(text) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("42", "42"),
        (" 42. ", "42"),  # trailing period
        ("$1,234$", "1234"),
        ("1,234.", "1234"),
        ("-1,000", "-1000"),
        ("2.500", "2.5"),
        ("10.0", "10"),
        ("x + 1", "x+1"),  # whitespace never matters
        ("Paris.", "Paris"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_equal_answers_written_differently_normalize_to_one_vote_key() -> None:
    forms = ["The total is 1,000.", "\\boxed{1000}", "so $1000$", "1000.0"]
    assert {extract_final_answer(f) for f in forms} == {"1000"}


# --------------------------------------------------------------------------- majority vote


def test_majority_clear_winner_is_chosen_by_its_first_voter() -> None:
    rnd = [
        traj(0, "\\boxed{3}"),
        traj(1, "so 5"),
        traj(2, "\\boxed{5}"),
        traj(3, "The answer: 5."),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.trajectory.index == 1
    assert verdict.answer == "message of 1: so 5"
    assert verdict.details == {"votes": {"3": 1, "5": 3}, "winner": "5", "tie": False}


def test_majority_votes_by_normalized_answer() -> None:
    rnd = [
        traj(0, "\\boxed{7}"),
        traj(1, "It is 1,000."),
        traj(2, "\\boxed{1000}"),
        traj(3, "$1000$"),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.details["votes"] == {"7": 1, "1000": 3}
    assert verdict.details["winner"] == "1000"
    assert verdict.trajectory.index == 1


def test_majority_tie_goes_to_the_answer_first_given_by_the_lowest_index() -> None:
    rnd = [
        traj(0, "\\boxed{8}"),
        traj(1, "\\boxed{2}"),
        traj(2, "\\boxed{2}"),
        traj(3, "\\boxed{8}"),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.details["winner"] == "8"
    assert verdict.details["tie"] is True
    assert verdict.trajectory.index == 0
    assert verdict.answer == "message of 0: \\boxed{8}"


def test_majority_tie_ignores_answers_with_fewer_votes() -> None:
    # "1" comes from the lowest index, but only the tied leaders (4 and 6) compete.
    rnd = [
        traj(0, "\\boxed{1}"),
        traj(1, "\\boxed{6}"),
        traj(2, "\\boxed{4}"),
        traj(3, "\\boxed{4}"),
        traj(4, "\\boxed{6}"),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.details == {"votes": {"1": 1, "6": 2, "4": 2}, "winner": "6", "tie": True}
    assert verdict.trajectory.index == 1


def test_majority_three_way_tie_takes_index_zero() -> None:
    rnd = [traj(0, "\\boxed{c}"), traj(1, "\\boxed{a}"), traj(2, "\\boxed{b}")]
    verdict = MajorityVote().aggregate([rnd])
    assert (verdict.details["winner"], verdict.details["tie"]) == ("c", True)
    assert verdict.trajectory.index == 0


def test_majority_verdict_does_not_depend_on_the_order_trajectories_are_given_in() -> None:
    rnd = [
        traj(0, "\\boxed{9} first"),
        traj(1, "\\boxed{4}"),
        traj(2, "\\boxed{4} again"),
        traj(3, "\\boxed{9} second"),
        traj(4, "<think>no answer yet</think>"),
    ]
    verdicts = {
        (v.trajectory.index, v.answer, v.details["winner"], v.details["tie"])
        for perm in itertools.permutations(rnd)
        for v in [MajorityVote().aggregate([list(perm)])]
    }
    assert verdicts == {(0, "message of 0: \\boxed{9} first", "9", True)}


def test_responses_without_an_answer_do_not_vote() -> None:
    rnd = [
        traj(0, "<think>5 5 5 5</think>"),
        traj(1, ""),
        traj(2, "\\boxed{9}"),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.details == {"votes": {"9": 1}, "winner": "9", "tie": False}
    assert verdict.trajectory.index == 2


def test_no_extractable_answer_falls_back_to_the_first_successful_trajectory() -> None:
    rnd = [
        traj(0, "\\boxed{5}", error="HTTP 500"),
        traj(1, "<think>I think it is 5</think>"),
        traj(2, ""),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.trajectory.index == 1
    assert verdict.answer == "message of 1: <think>I think it is 5</think>"
    assert verdict.details == {"votes": {}}


def test_failed_trajectories_do_not_vote() -> None:
    # Two failed calls that somehow carry text must not outvote one real answer.
    rnd = [
        traj(0, "\\boxed{13}", error="HTTP 500"),
        traj(1, "\\boxed{13}", error="timeout"),
        traj(2, "\\boxed{4}"),
    ]
    verdict = MajorityVote().aggregate([rnd])
    assert verdict.details["votes"] == {"4": 1}
    assert verdict.trajectory.index == 2


def test_all_failed_raises() -> None:
    rnd = [traj(0, "", error="HTTP 500"), traj(1, "", error="HTTP 503")]
    with pytest.raises(ValueError, match="no successful trajectory"):
        MajorityVote().aggregate([rnd])


def test_majority_reads_only_the_last_round() -> None:
    first = [traj(i, "\\boxed{1}") for i in range(3)]
    last = [traj(0, "\\boxed{2}", round_=1)]
    verdict = MajorityVote().aggregate([first, last])
    assert verdict.details["votes"] == {"2": 1}
    assert verdict.trajectory.round == 1


def test_majority_with_a_custom_extractor() -> None:
    rnd = [traj(0, "No"), traj(1, " yes"), traj(2, "YES ")]
    verdict = MajorityVote(extract=lambda s: s.strip().lower() or None).aggregate([rnd])
    assert verdict.details["winner"] == "yes"
    assert verdict.trajectory.index == 1


# --------------------------------------------------------------------------- first answer


def test_first_answer_is_the_first_successful_message_of_the_last_round() -> None:
    early = [traj(0, "\\boxed{0}")]
    last = [
        traj(0, "\\boxed{1}", error="HTTP 500", round_=1),
        traj(1, "\\boxed{2}", round_=1),
        traj(2, "\\boxed{2}", round_=1),
    ]
    verdict = FirstAnswer().aggregate([early, last])
    assert (verdict.trajectory.round, verdict.trajectory.index) == (1, 1)
    assert verdict.answer == "message of 1: \\boxed{2}"
    assert verdict.details == {}


def test_first_answer_goes_by_index_not_by_the_order_given() -> None:
    rnd = [traj(2, "\\boxed{2}"), traj(1, "\\boxed{1}"), traj(0, "x", error="HTTP 500")]
    assert FirstAnswer().aggregate([rnd]).trajectory.index == 1


def test_first_answer_all_failed_raises() -> None:
    with pytest.raises(ValueError, match="no successful trajectory"):
        FirstAnswer().aggregate([[traj(0, "", error="boom")]])


def test_aggregators_satisfy_the_protocol_and_have_names() -> None:
    assert isinstance(MajorityVote(), Aggregator)
    assert isinstance(FirstAnswer(), Aggregator)
    assert (MajorityVote().name, FirstAnswer().name) == ("majority", "first")


# --------------------------------------------------------------------------- off the loop


def fresh_words(n: int, seed: int) -> list[str]:
    """``n`` different letter strings no earlier vote of this process has parsed."""
    draw = random.Random(f"{seed}-{time.time_ns()}")
    return ["".join(draw.choices(string.ascii_lowercase, k=10)) for _ in range(n)]


def word_round(words: list[str]) -> list[Trajectory]:
    """A round whose explorers answer the words (math-verify reads each as a symbol)."""
    return [traj(i, f"So the answer is \\boxed{{\\text{{{w}}}}}.") for i, w in enumerate(words)]


async def test_a_vote_off_the_loop_runs_in_a_thread_and_leaves_the_loop_free() -> None:
    rounds = [word_round(fresh_words(120, 1))]
    vote = Recorded(MajorityVote(extract=slow_extract))
    done = asyncio.Event()
    lag = asyncio.ensure_future(loop_lag(done))
    started = time.monotonic()
    verdict = await aggregate_off_loop(vote, rounds)
    took = time.monotonic() - started
    done.set()
    worst = await lag
    assert vote.thread != threading.get_ident()
    assert verdict == MajorityVote().aggregate(rounds)  # the same vote (now from the cache)
    assert len(verdict.details["votes"]) == 120
    assert took > 0.3, "the vote was too quick to tell"
    assert worst < max(0.25, took / 3), f"the loop stalled {worst:.2f} s of a {took:.2f} s vote"


async def test_cancelling_a_vote_off_the_loop_stops_its_thread() -> None:
    vote = Recorded(MajorityVote())
    task = asyncio.ensure_future(aggregate_off_loop(vote, [word_round(fresh_words(600, 2))]))
    while not vote.started.is_set():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    cancelled = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    while not vote.ended and time.monotonic() - cancelled < 10:
        await asyncio.sleep(0.01)
    assert vote.ended, "the vote's thread ran on after its caller was cancelled"
    ended, outcome = vote.ended[0]
    assert outcome == "VoteCancelledError"
    assert ended - cancelled < 2.0
