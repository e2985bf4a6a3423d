"""The embedded server's request checks, chat template and stop-string logic (no model needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from pacore_graph.embedded import DEFAULT_MAX_SEQUENCES
from pacore_graph.embedded.protocol import RequestError, parse_request
from pacore_graph.settings.options import EMBEDDED_MAX_CONCURRENCY

_OK: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}


def test_a_plain_request_is_accepted_with_openai_defaults() -> None:
    request = parse_request({**_OK, "model": "anything", "max_tokens": 5}, max_n=8)
    assert (request.n, request.temperature, request.top_p) == (1, 1.0, 1.0)
    assert request.token_cap() == 5
    assert request.stop_strings() == ()
    newer = parse_request({**_OK, "max_completion_tokens": 7, "stop": "x"}, max_n=8)
    assert newer.token_cap() == 7
    assert newer.stop_strings() == ("x",)


@pytest.mark.parametrize(
    ("extra", "alternatives"),
    [
        ({}, None),
        ({"logprobs": False}, None),
        ({"logprobs": None}, None),
        ({"logprobs": True}, 0),
        ({"logprobs": True, "top_logprobs": 0}, 0),
        ({"logprobs": True, "top_logprobs": 20}, 20),
    ],
)
def test_logprobs_and_top_logprobs_are_accepted_in_openai_s_range(
    extra: dict[str, Any], alternatives: int | None
) -> None:
    """``None`` leaves the engine's default path alone; ``k`` asks for k alternatives."""
    assert parse_request({**_OK, **extra}, max_n=8).logprob_alternatives() == alternatives


def test_text_parts_are_joined_and_developer_is_a_system_message() -> None:
    request = parse_request(
        {
            "messages": [
                {"role": "developer", "content": "be brief"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ]
        },
        max_n=1,
    )
    assert [m.for_template() for m in request.messages] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "ab"},
    ]


@pytest.mark.parametrize(
    ("extra", "param", "fragment"),
    [
        ({"n": 9}, "n", "at most 8"),
        ({"n": 0}, "n", "greater than or equal to 1"),
        ({"tools": []}, "tools", "Unrecognized request argument supplied: tools"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "less than or equal to 20"),
        ({"logprobs": True, "top_logprobs": -1}, "top_logprobs", "greater than or equal to 0"),
        ({"top_logprobs": 5}, "top_logprobs", "requires logprobs to be true"),
        ({"logprobs": False, "top_logprobs": 0}, "top_logprobs", "requires logprobs"),
        ({"logprobs": "maybe"}, "logprobs", "valid boolean"),
        ({"top_p": 0}, "top_p", "greater than 0"),
        ({"stop": [""]}, "stop", "must not be empty"),
        ({"stream_options": {"foo": True}}, "stream_options.foo", "Unrecognized"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, None, None),
    ],
)
def test_bad_fields_are_one_line_errors_naming_the_parameter(
    extra: dict[str, Any], param: str | None, fragment: str | None
) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({**_OK, **extra}, max_n=8)
    error = caught.value.body()["error"]
    assert error["type"] == "invalid_request_error"
    assert "\n" not in error["message"]
    if param is not None:
        assert error["param"] == param
    if fragment is not None:
        assert fragment in error["message"]


def test_more_messages_than_allowed_are_refused_before_they_are_validated() -> None:
    many = {"messages": [{"role": "user", "content": "a"}] * 5}
    assert len(parse_request(many, max_n=1, max_messages=5).messages) == 5
    with pytest.raises(RequestError, match="at most 4 messages") as caught:
        parse_request(many, max_n=1, max_messages=4)
    assert caught.value.param == "messages"
    # Counted before validation: a list of junk past the cap is refused for its length.
    with pytest.raises(RequestError, match="at most 4 messages"):
        parse_request({"messages": [None] * 10_000}, max_n=1, max_messages=4)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "a\ud800b"}]}, "messages.0.content"),
        (
            {"messages": [_OK["messages"][0], {"role": "user", "content": [
                {"type": "text", "text": "ok"}, {"type": "text", "text": "\udfff"}]}]},
            "messages.1.content",
        ),
        ({**_OK, "stop": ["fine", "x\udc80"]}, "stop.1"),
    ],
)  # fmt: skip
def test_a_lone_surrogate_is_a_400_naming_its_field(body: dict[str, Any], param: str) -> None:
    """Valid JSON (a ``\\ud800`` escape) but no character: before issue 31, a 500."""
    with pytest.raises(RequestError, match="lone surrogate") as caught:
        parse_request(body, max_n=1)
    assert caught.value.param == param
    # A pair of escapes is one character: JSON joins it (Python's literal would not).
    pair = json.loads('{"messages": [{"role": "user", "content": "\\ud83d\\ude42"}]}')
    assert parse_request(pair, max_n=1).messages[0].text() == "\U0001f642"


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(RequestError, match="JSON object"):
        parse_request([_OK], max_n=8)


def test_embedded_runs_never_ask_for_more_sequences_than_the_server_decodes() -> None:
    assert EMBEDDED_MAX_CONCURRENCY <= DEFAULT_MAX_SEQUENCES


def test_model_serve_takes_an_optional_folder() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pacore_graph.cli", "model", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[model_dir]" in proc.stdout
    assert "embedded" in proc.stdout
