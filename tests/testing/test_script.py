"""testing/script: what a responder sees (frozen, its seed) and what it answers."""

from __future__ import annotations

import dataclasses

import pytest

import pacore_graph.testing as testing
from pacore_graph.testing import scripted_server
from pacore_graph.testing.script import ScriptedReply, ScriptedRequest


def request(params: dict[str, object]) -> ScriptedRequest:
    return ScriptedRequest(
        messages=[{"role": "user", "content": "hi"}],
        last_user="hi",
        sample_index=0,
        model="m",
        params=dict(params),
    )


@pytest.mark.parametrize(
    ("params", "seed"), [({"seed": 7}, 7), ({}, None), ({"seed": "7"}, None), ({"seed": 1.5}, None)]
)
def test_the_seed_is_an_integer_or_none(params: dict[str, object], seed: int | None) -> None:
    assert request(params).seed == seed


def test_a_request_cannot_carry_state_between_calls() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        request({}).attempt = 1  # type: ignore[misc]


def test_a_reply_defaults_to_computed_finish_and_tokens() -> None:
    reply = ScriptedReply(content="x")
    assert (reply.finish_reason, reply.completion_tokens, reply.tool_calls) == (None, None, ())


def test_the_server_and_the_package_name_the_same_types() -> None:
    assert scripted_server.ScriptedReply is ScriptedReply is testing.ScriptedReply
    assert scripted_server.ScriptedRequest is ScriptedRequest is testing.ScriptedRequest
