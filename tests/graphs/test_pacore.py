"""The graph ``langgraph.json`` serves: configured from the environment, answers over HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pacore_graph.graphs import pacore as served
from pacore_graph.settings.fields import SETTINGS
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def closing_clients(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Close the HTTP sessions of the clients ``make_graph`` builds (no unclosed-session noise)."""
    made: list[Any] = []
    real = served.chat_client_for

    def tracked(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(served, "chat_client_for", tracked)
    yield
    for client in made:
        await client.aclose()


def test_langgraph_json_points_at_the_module_graph() -> None:
    spec = json.loads((ROOT / "langgraph.json").read_text())
    path, _, attr = spec["graphs"]["pacore"].partition(":")
    assert (ROOT / path).resolve() == Path(served.__file__).resolve()
    assert attr == "graph" and served.graph is not None


def test_config_from_env() -> None:
    assert served.config_from_env({}).rounds == (4,)
    assert served.config_from_env({"PACORE_PRESET": "high"}).rounds == (32, 4)
    cfg = served.config_from_env(
        {"PACORE_ROUNDS": "8,2", "PACORE_MAX_CONCURRENCY": "16", "PACORE_MAX_TOKENS": "99"}
    )
    assert cfg.rounds == (8, 2) and cfg.max_concurrency == 16 and cfg.sampling.max_tokens == 99
    with pytest.raises(ValidationError, match="rounds"):
        served.config_from_env({"PACORE_ROUNDS": "8,0"})


@pytest.mark.usefixtures("closing_clients")
async def test_served_graph_runs_against_the_configured_server() -> None:
    async with ScriptedServer(model="served-m") as srv:
        graph = served.make_graph(
            {"PACORE_BASE_URL": srv.base_url, "PACORE_MODEL": "served-m", "PACORE_ROUNDS": "3"}
        )
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "Q?"}]})
        assert [len(r) for r in out["result"].rounds] == [3, 1]
        assert {r.body["model"] for r in srv.requests} == {"served-m"}


@pytest.mark.usefixtures("closing_clients")
async def test_the_served_graph_passes_on_only_the_confident_share_when_asked() -> None:
    """``PACORE_REFERENCE_FILTER`` builds PaCoRe with confidence, as ``pacore run`` does."""

    def reply(req: ScriptedRequest) -> ScriptedReply:
        sure = ((req.seed or 0) + req.sample_index) % 2 == 0
        return ScriptedReply(
            content=f"So {'sure' if sure else 'unsure'}", confidence=3.0 if sure else 1.0
        )

    env = {"PACORE_MODEL": "m", "PACORE_ROUNDS": "4", "PACORE_SEED": "100"}
    async with ScriptedServer(reply, model="m") as srv:
        plain = served.make_graph({**env, "PACORE_BASE_URL": srv.base_url})
        await plain.ainvoke({"messages": [{"role": "user", "content": "Q?"}]})
        filtered = served.make_graph(
            {**env, "PACORE_BASE_URL": srv.base_url, "PACORE_REFERENCE_FILTER": "confidence:0.5"}
        )
        await filtered.ainvoke({"messages": [{"role": "user", "content": "Q?"}]})
        finals = [r.body for r in srv.requests if "Reference" in json.dumps(r.body["messages"])]
    plain_final, filtered_final = (json.dumps(b["messages"]) for b in finals)
    assert plain_final.count("So unsure") == 2 and plain_final.count("So sure") == 2
    assert filtered_final.count("So unsure") == 0 and filtered_final.count("So sure") == 2
    assert "top_logprobs" not in finals[0] and finals[1]["top_logprobs"] == 20


def test_the_served_graph_reads_the_cli_settings_model() -> None:
    """``PACORE_*`` variables mean the same to ``langgraph dev`` as to ``pacore run``."""
    cfg = served.config_from_env(
        {"PACORE_TEMPERATURE": "0.3", "PACORE_SEED": "5", "PACORE_RETRIES": "2"}
    )
    assert cfg.sampling.temperature == 0.3 and cfg.sampling.seed == 5
    assert cfg.retry.max_attempts == 2
    # the catalogue's default, as for pacore run: the graph states no other
    assert served.config_from_env({}).max_concurrency == SETTINGS["max_concurrency"].default
    assert not hasattr(served, "DEFAULT_MAX_CONCURRENCY")
    with pytest.raises(ValidationError, match="temperature"):
        served.config_from_env({"PACORE_TEMPERATURE": "warm"})


@pytest.mark.usefixtures("closing_clients")
async def test_served_graph_spreads_over_comma_separated_replicas() -> None:
    async with ScriptedServer(model="m") as a, ScriptedServer(model="m") as b:
        graph = served.make_graph(
            {
                "PACORE_BASE_URL": f"{a.base_url},{b.base_url}",
                "PACORE_MODEL": "m",
                "PACORE_ROUNDS": "6",
                "PACORE_NO_BATCH": "1",
            }
        )
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "Q?"}]})
        assert [len(r) for r in out["result"].rounds] == [6, 1]
        assert a.requests and b.requests
        assert len(a.requests) + len(b.requests) == 6 + 1


@pytest.mark.usefixtures("closing_clients")
async def test_the_operator_caps_what_a_request_may_ask_for() -> None:
    from pacore_graph.settings.per_run import SettingsError

    async with ScriptedServer(model="m") as srv:
        graph = served.make_graph(
            {
                "PACORE_BASE_URL": srv.base_url,
                "PACORE_MODEL": "m",
                "PACORE_MAX_ROUNDS": "2",
                "PACORE_MAX_TOKENS_CAP": "64",
            }
        )
        question = {"messages": [{"role": "user", "content": "Q?"}]}
        with pytest.raises(SettingsError, match=r"context\.rounds: 3 rounds"):
            await graph.ainvoke(question, context={"rounds": [1, 1, 1]})
        with pytest.raises(SettingsError, match=r"context\.max_tokens: .*cap of 64"):
            await graph.ainvoke(question, context={"max_tokens": 65})
        with pytest.raises(SettingsError, match=r"context\.compactor"):
            await graph.ainvoke(question, context={"compactor": "os:abort"})
        assert srv.requests == []
        out = await graph.ainvoke(question, context={"rounds": [2, 1], "max_tokens": 64})
        assert [len(r) for r in out["result"].rounds] == [2, 1, 1]
    with pytest.raises(ValidationError, match="4097 model calls"):
        served.config_from_env({"PACORE_ROUNDS": "1024,1024,1024,1024"})
