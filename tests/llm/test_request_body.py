"""The one request body every path sends: what JSON a chat request produces.

The expectations are built from the sampling settings themselves
(``SamplingParams.request_fields``), so a new setting reaches every path or
fails here.
"""

from __future__ import annotations

import json

import pytest

from pacore_graph.errors import InvalidPromptError
from pacore_graph.llm.request_body import chat_body, encode, single_sample
from pacore_graph.settings.config import SamplingParams

MESSAGES = ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"})
PARAMS = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=64, logprobs=True,
                        extra_body={"top_k": 20})  # fmt: skip


def test_a_plain_request_is_the_model_the_messages_and_the_sampling_fields() -> None:
    body = chat_body("m", MESSAGES, PARAMS)
    assert body == {"model": "m", "messages": list(MESSAGES), **PARAMS.request_fields()}
    assert body["top_k"] == 20 and body["logprobs"] is True  # extra_body and logprobs pass through
    assert not {"n", "seed", "stream"} & set(body)  # defaults are not sent


def test_n_seed_and_stream_are_added_only_when_asked() -> None:
    body = chat_body("m", MESSAGES, PARAMS, n=4, seed=7, stream=True)
    assert (body["n"], body["seed"], body["stream"]) == (4, 7, True)
    assert "n" not in chat_body("m", MESSAGES, PARAMS, n=1)
    assert chat_body("m", MESSAGES, PARAMS, seed=0)["seed"] == 0  # a zero seed is a seed


def test_unset_max_tokens_is_not_sent() -> None:
    assert "max_tokens" not in chat_body("m", MESSAGES, SamplingParams(max_tokens=None))


def test_a_prompt_that_is_not_unicode_is_refused_before_anything_is_sent() -> None:
    bad = [{"role": "user", "content": "caf\udce9"}]  # a lone surrogate
    with pytest.raises(InvalidPromptError, match="not valid UTF-8") as caught:
        chat_body("m", bad, PARAMS)
    assert caught.value.kind == "invalid_prompt"  # our input, not the upstream's fault
    assert not caught.value.retryable


def test_a_single_sample_keeps_the_sampling_and_takes_its_own_seed() -> None:
    body = chat_body("m", MESSAGES, PARAMS, n=4, seed=100, stream=True)
    body["stream_options"] = {"include_usage": True}
    one = single_sample(body, seed=102)
    assert one == {**chat_body("m", MESSAGES, PARAMS), "seed": 102}
    assert "seed" not in single_sample(body, seed=None)
    assert body["n"] == 4 and body["seed"] == 100  # the original is left as it was


def test_encode_is_the_json_sent() -> None:
    body = chat_body("m", MESSAGES, PARAMS, n=2)
    raw = encode(body)
    assert isinstance(raw, bytes) and json.loads(raw) == body
