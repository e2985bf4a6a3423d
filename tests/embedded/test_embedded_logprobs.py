"""Token log-probabilities from the embedded server, over real HTTP against the real engine.

DeepConf reads each token's ``top_logprobs`` (JSON for the offline vote,
streamed deltas for the online stop), so the server must return them as
OpenAI and vLLM do: one entry per completion token with its text, its
log-probability, its bytes and the ``k`` most likely tokens at that
position, sorted. These tests hold the numbers to what a log-softmax must
satisfy, and the stream to the same numbers as the JSON answer.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from embedded_support import require_embedded

from pacore_graph.embedded import EmbeddedServer

pytestmark = pytest.mark.embedded

_QUESTION = [{"role": "user", "content": "Name a colour and say why you like it."}]


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    require_embedded()
    with EmbeddedServer(max_sequences=4) as running:
        yield running


def _post(server: EmbeddedServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a chat completion; (status, JSON body) whatever the status."""
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps({"messages": _QUESTION, **body}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _check_entries(content: list[dict[str, Any]], k: int) -> None:
    """What every entry of a log-softmax's top-k must satisfy."""
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["logprob"] <= 0.0
        assert bytes(entry["bytes"]).decode("utf-8", errors="replace") == entry["token"]
        top = entry["top_logprobs"]
        assert len(top) == k
        values = [alt["logprob"] for alt in top]
        assert values == sorted(values, reverse=True)
        assert all(v <= 0.0 for v in values)
        assert math.fsum(math.exp(v) for v in values) <= 1.0 + 1e-6
        for alt in top:
            assert set(alt) == {"token", "logprob", "bytes"}
            if alt["bytes"] == entry["bytes"]:  # the sampled token is among the top k
                assert alt["logprob"] == entry["logprob"]
        # A token outside the top k is less likely than all of them.
        if top and all(alt["bytes"] != entry["bytes"] for alt in top):
            assert entry["logprob"] <= values[-1]


def test_each_token_has_its_logprob_and_top_5_sorted_and_normalised(
    server: EmbeddedServer,
) -> None:
    status, body = _post(
        server,
        {
            "n": 2,
            "max_tokens": 32,
            "seed": 11,
            "temperature": 1.0,
            "logprobs": True,
            "top_logprobs": 5,
            "return_token_ids": True,
        },
    )

    assert status == 200, body
    for choice in body["choices"]:
        content = choice["logprobs"]["content"]
        # One entry per completion token: what the client counts tokens from.
        assert len(content) == len(choice["token_ids"]) > 0
        _check_entries(content, 5)
        # The bytes join to the text (no stop string cut it).
        text = b"".join(bytes(e["bytes"]) for e in content).decode("utf-8", errors="replace")
        assert text == choice["message"]["content"]
    assert body["usage"]["completion_tokens"] == sum(
        len(c["logprobs"]["content"]) for c in body["choices"]
    )


def test_greedy_samples_the_top_1_token(server: EmbeddedServer) -> None:
    status, body = _post(
        server, {"max_tokens": 24, "temperature": 0.0, "logprobs": True, "top_logprobs": 3}
    )

    assert status == 200, body
    content = body["choices"][0]["logprobs"]["content"]
    assert content
    _check_entries(content, 3)
    for entry in content:
        best = entry["top_logprobs"][0]
        assert (best["token"], best["bytes"], best["logprob"]) == (
            entry["token"],
            entry["bytes"],
            entry["logprob"],
        )


def test_logprobs_without_top_logprobs_give_the_sampled_token_only(
    server: EmbeddedServer,
) -> None:
    status, body = _post(server, {"max_tokens": 8, "seed": 2, "logprobs": True})

    assert status == 200, body
    content = body["choices"][0]["logprobs"]["content"]
    assert content
    _check_entries(content, 0)


def test_the_stream_carries_the_same_tokens_and_numbers_as_the_json_answer(
    server: EmbeddedServer,
) -> None:
    """Same seed, same samples: the deltas' entries concatenate to the JSON answer's."""
    body = {"n": 2, "max_tokens": 24, "seed": 5, "temperature": 0.8}
    asked = {**body, "logprobs": True, "top_logprobs": 4}
    status, whole = _post(server, asked)
    assert status == 200, whole

    client = openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
    stream = client.chat.completions.create(
        model=server.model,
        messages=_QUESTION,
        stream=True,
        **asked,  # type: ignore[arg-type]
    )
    streamed: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    text = {0: "", 1: ""}
    for chunk in stream:
        for choice in chunk.choices:
            text[choice.index] += choice.delta.content or ""
            if choice.logprobs is not None and choice.logprobs.content is not None:
                streamed[choice.index] += [e.model_dump() for e in choice.logprobs.content]

    for index, choice in enumerate(whole["choices"]):
        assert text[index] == choice["message"]["content"]
        expected = choice["logprobs"]["content"]
        got = streamed[index]
        assert [e["bytes"] for e in got] == [e["bytes"] for e in expected]
        for mine, theirs in zip(got, expected, strict=True):
            assert mine["token"] == theirs["token"]
            assert mine["logprob"] == pytest.approx(theirs["logprob"], abs=1e-9)
            assert [(a["bytes"], a["logprob"]) for a in mine["top_logprobs"]] == [
                (a["bytes"], pytest.approx(a["logprob"], abs=1e-9)) for a in theirs["top_logprobs"]
            ]


def test_without_logprobs_nothing_changes(server: EmbeddedServer) -> None:
    """``logprobs`` null in the JSON answer, and no ``logprobs`` key in the chunks, as before."""
    status, body = _post(server, {"max_tokens": 6, "seed": 1})
    assert status == 200, body
    assert body["choices"][0]["logprobs"] is None
    status, body = _post(server, {"max_tokens": 6, "seed": 1, "logprobs": False})
    assert status == 200, body
    assert body["choices"][0]["logprobs"] is None

    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps({"messages": _QUESTION, "max_tokens": 6, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        lines = response.read().decode().splitlines()
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert chunks
    assert all("logprobs" not in c for chunk in chunks for c in chunk["choices"])


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"logprobs": True, "top_logprobs": 21}, "less than or equal to 20"),
        ({"logprobs": True, "top_logprobs": -1}, "greater than or equal to 0"),
        ({"top_logprobs": 3}, "top_logprobs requires logprobs to be true"),
        ({"logprobs": False, "top_logprobs": 3}, "top_logprobs requires logprobs to be true"),
    ],
)
def test_bad_logprob_requests_are_openai_style_400s(
    server: EmbeddedServer, body: dict[str, Any], fragment: str
) -> None:
    status, answer = _post(server, {"max_tokens": 4, **body})

    assert status == 400
    error = answer["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "top_logprobs"
    assert fragment in error["message"]
