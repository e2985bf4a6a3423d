"""``pacore serve``: what one request may ask for, and what it may name.

The same ``RequestLimits`` the graph and the CLI use caps a request's rounds
(from the model name ``pacore:K1,K2,..`` or the ``rounds`` field), its samples
and its ``max_tokens``: over a cap is a 400 naming the field, and the
upstream never hears of it. A request's compactor is a built-in or a name
the deployment registered: nothing it names is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serve_support import RunningServe, running_serve

from pacore_graph.serve import ServeSettings
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.testing import ScriptedServer
from pacore_graph.values.compaction import AnswerCompactor
from pacore_graph.values.compactor_registry import CompactorRegistry

FAST = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.01)
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer().run_in_thread() as srv:
        yield srv


def serve_settings(upstream: ScriptedServer, **overrides: Any) -> ServeSettings:
    return ServeSettings(upstreams=(upstream.base_url,), model="scripted", retry=FAST, **overrides)


@pytest.fixture
def served(upstream: ScriptedServer) -> Iterator[RunningServe]:
    with running_serve(serve_settings(upstream)) as srv:
        yield srv


def post(srv: RunningServe, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=60)


def refused(resp: httpx.Response, param: str) -> str:
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["param"] == param
    return str(err["message"])


@pytest.mark.parametrize(
    ("fields", "param", "cause"),
    [
        ({"model": "pacore:" + ",".join(["1024"] * 40)}, "model", "40 rounds"),
        ({"model": "pacore:" + ",".join(["1024"] * 10_000)}, "model", "10000 rounds"),
        ({"model": "pacore:1024,1024,1024,1024"}, "model", "4097 model calls"),
        ({"rounds": [1024] * 16}, "rounds", "16385 model calls"),
        ({"rounds": ",".join(["1"] * 17)}, "rounds", "17 rounds"),
        ({"max_tokens": 10**9}, "max_tokens", "cap of 131072"),
        ({"max_completion_tokens": 131_073}, "max_completion_tokens", "cap of 131072"),
        ({"seed": 10**30}, "seed", "less than or equal to 9223372036854775807"),
    ],
)
def test_a_request_over_a_cap_is_a_400_naming_the_field(
    served: RunningServe, upstream: ScriptedServer, fields: dict[str, Any], param: str, cause: str
) -> None:
    body = {"model": "pacore-low", "messages": MESSAGES, **fields}
    message = refused(post(served, body), param)
    assert cause in message and len(message) < 300
    assert upstream.request_count == 0
    assert served.state.runs_started == 0


def test_the_presets_and_the_caps_edge_pass(served: RunningServe, upstream: ScriptedServer) -> None:
    ok = post(served, {"model": "pacore-high", "messages": MESSAGES, "max_tokens": 131_072})
    assert ok.status_code == 200, ok.text
    assert upstream.request_count == 3  # 32, 4 and 1 samples as n-requests


def test_the_operator_sets_the_caps(upstream: ScriptedServer) -> None:
    limits = RequestLimits(max_rounds=1, max_samples_per_request=9, max_tokens_cap=64)
    with running_serve(serve_settings(upstream, limits=limits)) as srv:
        assert "at most 1 per request" in refused(
            post(srv, {"model": "pacore:2,2", "messages": MESSAGES}), "model"
        )
        assert "at most 9" in refused(
            post(srv, {"model": "pacore-medium", "messages": MESSAGES}), "model"
        )
        body = {"model": "pacore:8", "messages": MESSAGES, "max_tokens": 65}
        refused(post(srv, body), "max_tokens")
        assert post(srv, {**body, "max_tokens": 64}).status_code == 200
    with pytest.raises(ValueError, match="--max-tokens"):
        serve_settings(upstream, limits=limits, sampling=SamplingParams(max_tokens=65))


@pytest.mark.parametrize("spec", ["sys:exit", "os:abort", "signal:pause", "this:x", "os:system"])
def test_a_request_cannot_import_code_through_its_compactor(
    served: RunningServe, upstream: ScriptedServer, spec: str
) -> None:
    sys.modules.pop("this", None)
    message = refused(
        post(served, {"model": "pacore:1", "messages": MESSAGES, "compactor": spec}), "compactor"
    )
    assert "not offered" in message
    assert "this" not in sys.modules
    assert upstream.request_count == 0
    assert post(served, {"model": "pacore:1", "messages": MESSAGES}).status_code == 200


def test_a_deployment_offers_its_own_compactors_by_name(upstream: ScriptedServer) -> None:
    registry = CompactorRegistry({"short": AnswerCompactor()})
    with running_serve(serve_settings(upstream, compactors=registry)) as srv:
        resp = post(srv, {"model": "pacore:2", "messages": MESSAGES, "compactor": "short"})
        assert resp.status_code == 200, resp.text
        synthesis = upstream.requests[-1].body["messages"][-1]["content"]
        # The answer compactor cut the references down to the answer itself.
        assert "Reference" in synthesis and "The answer is" not in synthesis
        message = refused(
            post(srv, {"model": "pacore:2", "messages": MESSAGES, "compactor": "long"}), "compactor"
        )
        assert "short" in message


def test_a_requests_rounds_may_carry_their_own_sampling_and_model(
    served: RunningServe, upstream: ScriptedServer
) -> None:
    """``rounds`` as JSON objects: each round's requests carry its model and sampling."""
    rounds = [{"k": 2, "model": "small", "temperature": 0.4}, 1]
    ok = post(served, {"model": "pacore-low", "messages": MESSAGES, "rounds": rounds})
    assert ok.status_code == 200, ok.text
    sent = [(r.body["model"], r.body["temperature"], r.body.get("n", 1)) for r in upstream.requests]
    assert sent == [("small", 0.4, 2), ("scripted", 1.0, 1), ("scripted", 1.0, 1)]
    for bad, cause in (
        ([{"k": 2, "tempo": 1}], "unknown round setting"),
        ([{"k": 2, "max_tokens": 10**9}], "cap of 131072"),
        ([{"k": 2, "temperature": 9}], "Round.temperature must be in [0.0, 2.0]"),
    ):
        body = {"model": "pacore-low", "messages": MESSAGES, "rounds": bad}
        assert cause in refused(post(served, body), "rounds")
    assert len(upstream.requests) == 3
