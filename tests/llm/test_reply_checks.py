"""Checking an answer's shape before anything is taken from it (issue 18, part 3).

Each helper of :mod:`pacore_graph.llm.reply_checks` on its own (every wrong
shape is ONE ``ModelCallError`` of kind ``malformed`` with a one-line cause,
a right one comes back typed), then the clients against a hostile upstream
sending each malformed answer and stream event over real HTTP.
"""

from __future__ import annotations

from typing import Any

import pytest
from hostile_support import SMALL, ask, errors, hostile

from pacore_graph.errors import ModelCallError
from pacore_graph.llm.chat_reply import parse_chat_choices
from pacore_graph.llm.reply_checks import (
    MAX_TOKENS_PER_SAMPLE,
    indexed_choices,
    malformed,
    object_field,
    optional_list,
    text_field,
    token_count,
    usage_of,
)
from pacore_graph.testing.hostile_upstream import MALFORMED_ATTACKS, MALFORMED_EVENT_ATTACKS
from pacore_graph.values.records import Completion

#: One call per helper with a value of the wrong shape, and a word its error must carry.
WRONG_SHAPES: list[tuple[str, Any, str]] = [
    ("usage", lambda: usage_of({"usage": [1, 2]}), "usage is [1, 2], not an object"),
    ("object", lambda: object_field({"message": "hi"}, "message", "choice 0"), "choice 0.message"),
    ("text", lambda: text_field({"content": 7}, "content", "choice 0.message"), "not a string"),
    ("list", lambda: optional_list({"tool_calls": {}}, "tool_calls", "m"), "not a list"),
    ("choices", lambda: indexed_choices("abc", 1), "choices is 'abc', not a list"),
    ("choice", lambda: indexed_choices([3], 1), "choice 0 is 3, not an object"),
    ("index type", lambda: indexed_choices([{"index": "0"}], 1), "index '0', not an integer"),
    ("index bool", lambda: indexed_choices([{"index": True}], 2), "not an integer"),
    ("negative", lambda: indexed_choices([{"index": -1}], 2), "out of range"),
    ("past n", lambda: indexed_choices([{"index": 2}], 2), "out of range (n=2)"),
    ("repeat", lambda: indexed_choices([{"index": 0}, {"index": 0}], 2), "appears twice"),
    ("too many", lambda: indexed_choices([{}, {}, {}], 2), "3 choices for n=2"),
]


@pytest.mark.parametrize(("what", "call", "cause"), WRONG_SHAPES, ids=[w[0] for w in WRONG_SHAPES])
def test_each_wrong_shape_is_one_malformed_error(what: str, call: Any, cause: str) -> None:
    with pytest.raises(ModelCallError) as caught:
        call()
    error = caught.value
    assert error.kind == "malformed" and not error.retryable
    assert cause in str(error) and "\n" not in str(error)


def test_a_huge_bad_value_is_shown_short() -> None:
    """The cause names the value, never the whole of it (it goes into a one-line error)."""
    bad = "x" * 10_000 + "\nsecond line"
    with pytest.raises(ModelCallError) as caught:
        usage_of({"usage": bad})
    text = str(caught.value)
    assert len(text) < len(bad) // 10 and "\n" not in text


def test_right_shapes_come_back_typed_and_absent_is_empty() -> None:
    assert usage_of({}) == {} and usage_of({"usage": None}) == {}
    assert object_field({}, "message", "c") == {}
    assert text_field({"content": None}, "content", "m") is None
    assert text_field({"content": "hi"}, "content", "m") == "hi"
    assert optional_list({}, "tool_calls", "m") is None
    assert optional_list({"tool_calls": [1]}, "tool_calls", "m") == [1]
    assert malformed("why").kind == "malformed"


def test_choices_come_in_index_order_with_absent_indexes_by_position() -> None:
    shuffled = [{"index": 2, "v": "c"}, {"index": 0, "v": "a"}, {"index": 1, "v": "b"}]
    assert [(i, c["v"]) for i, c in indexed_choices(shuffled, 3)] == [(0, "a"), (1, "b"), (2, "c")]
    positional = [{"v": "a"}, {"v": "b"}]
    assert [i for i, _ in indexed_choices(positional, None)] == [0, 1]
    # a stream event repeats a choice, and may carry more events than n
    repeated = [{"index": 0}, {"index": 0}, {"index": 1}]
    assert [i for i, _ in indexed_choices(repeated, 2, allow_repeats=True)] == [0, 0, 1]


@pytest.mark.parametrize("samples", [1, 4])
def test_token_counts_are_bounded_per_sample(samples: int) -> None:
    bound = MAX_TOKENS_PER_SAMPLE * samples
    assert token_count({"t": bound}, "t", samples=samples) == bound
    assert token_count({"t": float(bound)}, "t", samples=samples) == bound
    assert token_count({}, "t", samples=samples) == 0
    with pytest.raises(ModelCallError, match=f"outside 0..{bound}") as caught:
        token_count({"t": bound + 1}, "t", samples=samples)
    assert caught.value.kind == "malformed"


@pytest.mark.parametrize("attack", sorted([*MALFORMED_ATTACKS, "not_json"]))
async def test_a_malformed_answer_is_one_malformed_error(attack: str) -> None:
    async with hostile() as (server, client):
        outcomes = await client.complete_each(ask(attack), n=4, params=SMALL)
        url = server.base_url
    failures = errors(outcomes)
    assert len(failures) == 4 and len({id(e) for e in failures}) == 1  # ONE error, shared
    error = failures[0]
    assert error.kind == "malformed", str(error)
    assert "\n" not in str(error) and len(str(error)) < 500
    assert not error.retryable
    assert server.attacks_sent[attack] == 1  # neither retried nor split
    assert "malformed" in error.public_message() and url not in error.public_message()


async def test_forty_choices_for_n_4_are_refused_not_cut() -> None:
    async with hostile() as (_server, client):
        outcomes = await client.complete_each(ask("too_many_choices"), n=4, params=SMALL)
    assert "40 choices for n=4" in str(errors(outcomes)[0])


@pytest.mark.parametrize("attack", sorted(MALFORMED_EVENT_ATTACKS))
async def test_a_malformed_stream_event_is_one_malformed_error(attack: str) -> None:
    async with hostile() as (_server, client):
        got = dict([o async for o in client.stream_each(ask(attack), n=2, params=SMALL)])
    assert sorted(got) == [0, 1]
    kinds = {e.kind for e in errors(list(got.values()))}
    assert kinds == {"malformed"}, [str(e) for e in got.values()]
    assert all("\n" not in str(e) for e in got.values())


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        ({"completion_tokens": -1_999_999_999}, "outside"),
        ({"completion_tokens": float("inf")}, "not a number"),
        ({"completion_tokens": float("nan")}, "not a number"),
        ({"prompt_tokens": "lots"}, "not a number"),
        ({"prompt_tokens": [1]}, "not a number"),
        ({"prompt_tokens": True}, "not a number"),
        ({"completion_tokens": 2.5}, "not a number"),
        ({"completion_tokens": 10**12}, "outside"),
    ],
)
def test_usage_is_checked(usage: dict[str, Any], why: str) -> None:
    data = {"choices": [{"index": 0, "message": {"content": "x"}}], "usage": usage}
    with pytest.raises(ModelCallError, match=why) as caught:
        parse_chat_choices(data, latency_s=0.0, n=1)
    assert caught.value.kind == "malformed"


def test_integral_usage_floats_and_absent_indexes_are_fine() -> None:
    data = {
        "choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}],
        "usage": {"prompt_tokens": 3.0, "completion_tokens": 4},
    }
    out = parse_chat_choices(data, latency_s=0.0, n=2)
    assert [o.content for o in out if isinstance(o, Completion)] == ["a", "b"]
    assert sum(o.completion_tokens for o in out if isinstance(o, Completion)) == 4
