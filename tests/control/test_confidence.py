"""DeepConf's confidence arithmetic (control/confidence), against its public code's rules."""

from __future__ import annotations

import json

import pytest

from pacore_graph.control.confidence import (
    ConfidenceFilter,
    WindowConfidence,
    compact_logprobs,
    confidence_consensus,
    group_confidences,
    lowest_group_confidence,
    most_confident,
    parse_reference_filter,
    percentile,
    share_threshold,
    token_confidence,
    token_confidences,
    top_share,
    trajectory_confidence,
    weighted_vote,
)
from pacore_graph.testing.logprobs import logprob_entries
from pacore_graph.values.records import Trajectory


def entry(*top: float) -> dict[str, object]:
    return {"token": "x", "logprob": top[0], "top_logprobs": [{"logprob": v} for v in top]}


def test_token_confidence_is_minus_the_mean_top_logprob_rounded_to_three_places() -> None:
    assert token_confidence(entry(-0.1, -2.0, -3.9)) == 2.0
    assert token_confidence(entry(-0.12345)) == 0.123
    # No alternatives: the token's own log-probability; nothing at all: no confidence.
    assert token_confidence({"token": "x", "logprob": -1.5, "top_logprobs": []}) == 1.5
    assert token_confidence({"token": "x"}) is None
    assert token_confidences({"content": [entry(-1.0), {"token": "y"}, entry(-3.0)]}) == [1.0, 3.0]
    assert token_confidences(None) == []


def test_group_confidence_slides_a_window_and_a_short_trace_is_one_group() -> None:
    confs = [1.0, 2.0, 3.0, 4.0, 0.5]
    assert group_confidences(confs, 2) == [1.5, 2.5, 3.5, 2.25]
    assert group_confidences(confs, 10) == [sum(confs) / 5]
    assert group_confidences([], 4) == [0.0]
    assert lowest_group_confidence(confs, 2) == 1.5
    with pytest.raises(ValueError, match="window"):
        group_confidences(confs, 0)


def test_percentile_matches_numpys_linear_rule() -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0]
    # numpy.percentile(values, q) for these q, computed once with numpy 2.x.
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 9.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 10) == pytest.approx(1.2)
    assert percentile(values, 90) == pytest.approx(7.0)


def test_the_top_share_keeps_scores_at_or_above_the_threshold() -> None:
    scores = [5.0, 1.0, 3.0, 4.0, 2.0]
    assert share_threshold(scores, 0.4) == pytest.approx(3.4)
    assert top_share(scores, 0.4) == [0, 3]
    assert top_share(scores, 1.0) == [0, 1, 2, 3, 4]
    assert top_share([2.0, 2.0, 2.0], 0.1) == [0, 1, 2]  # ties are all kept
    with pytest.raises(ValueError, match="share"):
        top_share(scores, 0)


def test_weighted_vote_sums_confidence_per_answer_and_ties_go_to_the_first_seen() -> None:
    winner, weights = weighted_vote(["7", "8", "8", None, "7"], [3.0, 2.0, 2.0, 9.0, 0.5])
    assert winner == 1 and weights == {"7": 3.5, "8": 4.0}
    assert weighted_vote(["a", "b"], [1.0, 1.0])[0] == 0
    assert weighted_vote([None], [1.0]) == (None, {})
    # Equivalent answers vote together under the given rule.
    winner, weights = weighted_vote(
        ["0.5", "1/2", "3"], [1, 1, 1.5], lambda a, b: {a, b} <= {"0.5", "1/2"}
    )
    assert winner == 0 and weights == {"0.5": 2.0, "3": 1.5}


def test_the_online_window_stops_only_once_full_and_below_the_bar() -> None:
    window = WindowConfidence(threshold=2.0, window=3)
    assert [window.push(c) for c in (1.0, 1.0)] == [False, False]  # not a window yet
    assert window.lowest == 1.0
    window = WindowConfidence(threshold=2.0, window=3)
    pushed = [window.push(c) for c in (3.0, 3.0, 3.0, 1.0, 1.0)]
    assert pushed == [False, False, False, False, True]  # (3+1+1)/3 < 2 on the fifth
    assert window.lowest == pytest.approx(1.667)
    assert window.tokens == 5


def traj(index: int, confs: list[float] | None, *, error: str | None = None) -> Trajectory:
    logprobs = None if confs is None else {"content": [entry(-c) for c in confs]}
    return Trajectory(round=0, index=index, content=f"c{index}", logprobs=logprobs, error=error)


def test_trajectory_confidence_is_its_lowest_window() -> None:
    assert trajectory_confidence(traj(0, [2.0, 1.0, 3.0]), window=2) == 1.5
    assert trajectory_confidence(traj(0, None)) is None


def test_most_confident_passes_on_the_top_share_and_keeps_failures_and_order() -> None:
    round_ = [
        traj(0, [1.0, 1.0]),
        traj(1, [3.0, 3.0]),
        traj(2, None, error="timeout"),
        traj(3, [2.0, 2.0]),
        traj(4, [4.0, 4.0]),
    ]
    kept = most_confident(round_, 0.5, window=2)
    assert [t.index for t in kept] == [1, 2, 4]
    assert ConfidenceFilter(0.5, 2).apply(round_) == kept
    # A trajectory with no log-probabilities cannot be judged: nothing is filtered.
    unjudged = [*round_[:2], traj(5, None)]
    assert most_confident(unjudged, 0.1) == tuple(unjudged)


def test_parse_reference_filter() -> None:
    assert parse_reference_filter("confidence:0.5") == ConfidenceFilter(0.5)
    assert parse_reference_filter("confidence:0.25,64") == ConfidenceFilter(0.25, 64)
    assert parse_reference_filter(" confidence:1 ") == ConfidenceFilter(1.0)
    for bad in (
        "confidence",
        "length:0.5",
        "foo:1",
        "confidence:x",
        "confidence:1.5",
        "confidence:0",
        "confidence:nan",
        "confidence:0.5,",
        "confidence:0.5,0",
        "confidence:0.5,x",
    ):
        with pytest.raises(ValueError) as caught:
            parse_reference_filter(bad)
        # Each surface labels the message its own way (--reference-filter, PACORE_...).
        assert "--" not in str(caught.value), bad


def test_a_filter_reads_back_as_one_canonical_spec() -> None:
    assert parse_reference_filter("confidence:.50").spec == "confidence:0.5"
    assert parse_reference_filter("confidence:1.0,2048").spec == "confidence:1"
    assert parse_reference_filter("confidence:0.125,64").spec == "confidence:0.125,64"
    spec = ConfidenceFilter(0.3, 16).spec
    assert parse_reference_filter(spec) == ConfidenceFilter(0.3, 16)


def test_confidence_consensus_weighs_each_vote_by_its_confidence() -> None:
    def said(index: int, answer: str, conf: float) -> Trajectory:
        logprobs = {"content": [entry(-conf)] * 2}
        return Trajectory(round=0, index=index, content=rf"\boxed{{{answer}}}", logprobs=logprobs)

    round_ = [said(0, "7", 1.0), said(1, "7", 1.0), said(2, "4", 3.0), traj(3, None, error="x")]
    found = confidence_consensus(round_, window=2)
    # Counted, 7 has two votes of four; weighed, 4 has 3.0 of 5.0.
    assert found.answer == "4" and found.share == pytest.approx(0.6)
    assert found.trajectory is round_[2] and found.weights == {"7": 2.0, "4": 3.0}
    with pytest.raises(ValueError, match="log-probabilities"):
        confidence_consensus([traj(0, None)])


def test_compacted_logprobs_keep_each_tokens_confidence_and_drop_the_alternatives() -> None:
    entries = logprob_entries(["a", "b", "c"], [2.0, 0.5, 1.25], 20)
    raw = {"content": entries, "refusal": None}
    small = compact_logprobs(raw)
    assert small["refusal"] is None
    assert small["content"] == [
        {"token": "a", "logprob": entries[0]["logprob"], "confidence": 2.0},
        {"token": "b", "logprob": entries[1]["logprob"], "confidence": 0.5},
        {"token": "c", "logprob": entries[2]["logprob"], "confidence": 1.25},
    ]
    # What reads them sees the same trace: its confidences, and so its lowest group.
    assert token_confidences(small) == token_confidences(raw) == [2.0, 0.5, 1.25]
    t = Trajectory(round=0, index=0, content="x", logprobs=small)
    assert trajectory_confidence(t, 2) == trajectory_confidence(
        Trajectory(round=0, index=0, content="x", logprobs=raw), 2
    )
    assert len(json.dumps(small)) * 10 < len(json.dumps(raw))


@pytest.mark.parametrize(
    "logprobs",
    [
        None,
        [1.0, 2.0],
        {"content": None},
        {"content": [{"token": "a", "logprob": -0.5, "top_logprobs": []}]},
    ],
)
def test_logprobs_without_alternatives_are_kept_as_they_are(logprobs: object) -> None:
    assert compact_logprobs(logprobs) is logprobs
