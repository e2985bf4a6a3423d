"""The votes' grouping: the same groups as the pairwise definition, with almost no comparisons.

Property tests draw answer sets from many spellings of few values
(``answer_forms_support``) and compare :func:`group_answers` with
:func:`group_answers_pairwise` and with verbatim copies of the majority vote
and DeepConf's weighted vote as they were before the grouping changed
(``old_majority``, ``old_weighted_vote``). The width test counts
math-verify's comparisons: a vote over 256 distinct answers makes none.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import math_verify
import pytest
from answer_forms_support import FORMS, WORDS, answer_set

from pacore_graph.values.aggregation import MajorityVote, Verdict, extract_final_answer
from pacore_graph.values.answer_groups import (
    AnswerGroup,
    VoteCancelledError,
    _LeaderIndex,
    cancellable,
    check_cancelled,
    group_answers,
    group_answers_pairwise,
)
from pacore_graph.values.answer_keys import answer_key, keys_meet
from pacore_graph.values.answers import answers_equivalent
from pacore_graph.values.records import Trajectory

# ------------------------------------------------------------------ the old votes, verbatim


def old_majority(
    rounds: Sequence[Sequence[Trajectory]],
    extract: Callable[[str], str | None] = extract_final_answer,
    equivalent: Callable[[str, str], bool] = answers_equivalent,
) -> Verdict:
    """``MajorityVote.aggregate`` before the grouping routine (commit 48cfe3f)."""
    usable = sorted((t for t in rounds[-1] if not t.failed), key=lambda t: t.index)
    groups: list[list[Any]] = []
    for t in usable:
        answer = extract(t.content)
        if not answer:
            continue
        for group in groups:
            if group[0] == answer or equivalent(group[0], answer):
                group[1] += 1
                break
        else:
            groups.append([answer, 1, t])
    if not groups:
        return Verdict(trajectory=usable[0], answer=usable[0].message or "", details={"votes": {}})
    best = max(groups, key=lambda g: (g[1], -g[2].index))
    chosen: Trajectory = best[2]
    tied = [g for g in groups if g[1] == best[1]]
    return Verdict(
        trajectory=chosen,
        answer=chosen.message or "",
        details={"votes": {g[0]: g[1] for g in groups}, "winner": best[0], "tie": len(tied) > 1},
    )


def old_weighted_vote(
    answers: Sequence[str | None],
    weights: Sequence[float],
    equivalent: Callable[[str, str], bool] | None = None,
) -> tuple[int | None, dict[str, float]]:
    """``control.confidence.weighted_vote`` before the grouping routine (commit 48cfe3f)."""
    groups: list[list[Any]] = []  # [name, weight, first index]
    for i, (answer, weight) in enumerate(zip(answers, weights, strict=True)):
        if not answer:
            continue
        for group in groups:
            if group[0] == answer or (equivalent is not None and equivalent(group[0], answer)):
                group[1] += float(weight)
                break
        else:
            groups.append([answer, float(weight), i])
    if not groups:
        return None, {}
    best = groups[0]
    for group in groups[1:]:
        if group[1] > best[1]:
            best = group
    return best[2], {g[0]: round(g[1], 6) for g in groups}


# ------------------------------------------------------------------ property tests


def trajectories(answers: Sequence[str | None], seed: int) -> list[Trajectory]:
    """A round answering ``answers`` (None: a response without one), given in shuffled order."""
    round_ = [
        Trajectory(
            round=0,
            index=i,
            content=f"So the answer is \\boxed{{{a}}}." if a else "",
            message=f"m{i}",
        )
        for i, a in enumerate(answers)
    ]
    random.Random(seed).shuffle(round_)
    return round_


def remembered(equivalent: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
    """``equivalent`` computed once per ordered pair: the references share their comparisons."""
    seen: dict[tuple[str, str], bool] = {}

    def same(a: str, b: str) -> bool:
        if (a, b) not in seen:
            seen[(a, b)] = equivalent(a, b)
        return seen[(a, b)]

    return same


@pytest.mark.parametrize("seed", range(3))
def test_groups_match_the_pairwise_definition_and_the_old_votes(seed: int) -> None:
    answers = answer_set(seed, 14)
    weights = [round(random.Random(seed).uniform(0.1, 3.0), 3) for _ in answers]
    reference = remembered(answers_equivalent)  # the old votes' comparisons, each made once
    groups = group_answers(answers, weights=weights)
    assert groups == group_answers_pairwise(answers, reference, weights)
    assert len(groups) < len([a for a in answers if a])  # the set has equivalent spellings
    # DeepConf's vote and the majority vote, against their old code.
    from pacore_graph.control.confidence import weighted_vote

    assert weighted_vote(answers, weights, answers_equivalent) == old_weighted_vote(
        answers, weights, reference
    )
    rounds = [trajectories(answers, seed)]
    new, old = MajorityVote().aggregate(rounds), old_majority(rounds, equivalent=reference)
    assert (new.trajectory, new.answer, new.details) == (old.trajectory, old.answer, old.details)


@pytest.mark.parametrize("equivalent", [None, str.__eq__, lambda a, b: a[:1] == b[:1]])
def test_exact_and_custom_equivalences_group_as_the_scan(
    equivalent: Callable[[str, str], bool] | None,
) -> None:
    answers = ["1/2", "0.5", None, "1/2", "yes", "", "Yes", "0.5", "y"]
    assert group_answers(answers, equivalent) == group_answers_pairwise(answers, equivalent)
    exact = group_answers(answers, None)
    assert [(g.answer, g.members) for g in exact] == [
        ("1/2", (0, 3)),
        ("0.5", (1, 7)),
        ("yes", (4,)),
        ("Yes", (6,)),
        ("y", (8,)),
    ]


def test_a_group_is_named_by_its_first_answer_and_ties_keep_input_order() -> None:
    groups = group_answers(["0.5", "\\frac{1}{2}", "2", "1/2", "2.0"], weights=[1, 2, 3, 4, 5])
    assert groups == [
        AnswerGroup(answer="0.5", first=0, count=3, weight=7.0, members=(0, 1, 3)),
        AnswerGroup(answer="2", first=2, count=2, weight=8.0, members=(2, 4)),
    ]


def test_the_index_finds_exactly_the_leaders_whose_keys_meet() -> None:
    """No pair that could be equivalent is left out (and nothing is added)."""
    texts = list(dict.fromkeys(a for a in answer_set(7, 80, blanks=False) if a))
    keys = [answer_key(t) for t in texts]
    index = _LeaderIndex()
    for i, key in enumerate(keys):
        assert index.candidates(key) == {j for j in range(i) if keys_meet(keys[j], key)}
        index.add(i, key)


# ------------------------------------------------------------------ width


@pytest.fixture
def comparisons(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """math-verify's ``verify`` calls; over a budget it raises, so a quadratic vote fails fast."""
    count = [0]
    real = math_verify.verify

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        if count[0] > 300:
            raise AssertionError("over 300 math-verify comparisons: the vote is quadratic")
        return real(*args, **kwargs)

    monkeypatch.setattr(math_verify, "verify", counted)
    yield count


def distinct_answers(n: int) -> list[str]:
    """``n`` different answers in the spellings votes meet most: numbers, fractions, LaTeX."""
    kinds = (
        lambda k: str(17 * k + 3),
        lambda k: f"{k}.25",
        lambda k: f"\\frac{{{k}}}{{{k + 1}}}",
        lambda k: f"\\sqrt{{{k + 1}}}",
    )
    return [kinds[k % len(kinds)](k) for k in range(n)]


def test_256_distinct_answers_are_grouped_with_no_comparison(comparisons: list[int]) -> None:
    answers = distinct_answers(256)
    rounds = [trajectories(answers, 0)]
    started = time.process_time()
    verdict = MajorityVote().aggregate(rounds)
    cpu = time.process_time() - started
    assert len(verdict.details["votes"]) == 256
    assert comparisons[0] == 0
    assert cpu < 1.0, f"256 distinct answers took {cpu:.2f} s of CPU"


def test_equivalent_spellings_are_compared_only_with_their_own_value(
    comparisons: list[int],
) -> None:
    """Each value written four ways: each later spelling is compared with its value's leader."""
    spellings = ("{k}", "\\sqrt{{{kk}}}", "x={k}", "\\{{{k}\\}}")
    values = range(2, 42)
    answers = [f.format(k=k, kk=k * k) for k in values for f in spellings]
    groups = group_answers(answers)
    assert [(g.answer, g.count) for g in groups] == [(str(k), 4) for k in values]
    assert comparisons[0] == 3 * len(values)


# ------------------------------------------------------------------ cancellation


def test_a_cancelled_vote_stops_at_its_next_answer() -> None:
    stop = threading.Event()
    with cancellable(stop):
        check_cancelled()  # not set: nothing happens
        assert len(group_answers(["1", "2"])) == 2
        stop.set()
        with pytest.raises(VoteCancelledError):
            group_answers(["1", "2"])
        with pytest.raises(VoteCancelledError):
            group_answers_pairwise(["1", "2"])
    check_cancelled()  # outside the block nothing is cancelled
    assert len(group_answers(["1", "2"])) == 2


def test_words_and_forms_cover_the_rules() -> None:
    """The generated sets draw on every kind the key has a rule for."""
    kinds = {
        (k.relation, k.set_like, bool(k.probes), k.wild)
        for k in (answer_key(f.format(k=2, k1=3, h=1.0, kk=4, k2=4)) for f in FORMS)
    }
    assert (True, False, True, False) in kinds  # relations
    assert (False, True, True, False) in kinds  # sets, intervals
    assert any(answer_key(w).tokens & answer_key("yes").tokens for w in WORDS if w != "yes")
