"""Splitting an ``n``-sample request's usage over its samples (``apportion``).

A server that reports usage only for the whole request leaves each sample's
share to be estimated from its text. The rules checked here are what effective
TTC relies on: the shares sum to the reported total exactly, they follow the
text lengths, and a sample that produced anything is never counted as free
(a short answer beside a long one once got 0 tokens: a real trajectory with
``completion_tokens == 0``).
"""

from __future__ import annotations

import random

import pytest

from pacore_graph.errors import MalformedReplyError
from pacore_graph.llm.chat_reply import parse_chat_choices
from pacore_graph.llm.client import apportion
from pacore_graph.values.records import Completion


@pytest.mark.parametrize("seed", range(200))
def test_shares_sum_to_the_total_and_none_is_free(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 16)
    weights = [rng.choice([0, 1, 2, rng.randint(0, 5000)]) for _ in range(n)]
    total = rng.randint(0, 20_000)
    shares = apportion(total, weights)
    assert len(shares) == n
    assert sum(shares) == total
    assert all(s >= 0 for s in shares)
    if total >= n:
        assert min(shares) >= 1, (total, weights, shares)


def test_a_short_answer_beside_a_long_one_costs_at_least_one_token() -> None:
    shares = apportion(50, [200, 1])
    assert shares[1] >= 1
    assert sum(shares) == 50


def test_shares_follow_the_text_lengths() -> None:
    shares = apportion(1_000, [300, 100])
    # 2 tokens go one to each sample; the other 998 split 3:1 (748.5 / 249.5).
    assert shares[0] > 2 * shares[1]
    assert abs(shares[0] - (1 + 998 * 3 / 4)) <= 1
    assert sum(shares) == 1_000


def test_fewer_tokens_than_samples_are_still_exact() -> None:
    assert sum(apportion(1, [3, 4])) == 1
    assert apportion(0, [1, 2]) == [0, 0]
    assert apportion(5, []) == []


def test_a_choice_keeps_its_tool_calls_as_sent() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    data = {
        "choices": [
            {"index": 0, "message": {"content": None, "tool_calls": [call]}},
            {"index": 1, "message": {"content": "plain"}},
        ],
        "usage": {"completion_tokens": 4},
    }
    tooled, plain = parse_chat_choices(data, latency_s=0.0)
    assert isinstance(tooled, Completion) and isinstance(plain, Completion)
    assert tooled.tool_calls == (call,) and tooled.content == ""
    assert plain.tool_calls == ()
    bad = {"choices": [{"index": 0, "message": {"content": None, "tool_calls": ["f()"]}}]}
    with pytest.raises(MalformedReplyError, match=r"tool_calls\[0\] is not an object"):
        parse_chat_choices(bad, latency_s=0.0)
