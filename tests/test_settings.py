"""Per-run settings from ``config["configurable"]``: one built graph, many run shapes."""

from __future__ import annotations

from typing import Any

import pytest

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.settings import SettingsError, resolve_settings
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

QUESTION = {"messages": [{"role": "user", "content": "Q?"}]}


def reply(call: FakeCall) -> FakeReply:
    return FakeReply(
        content=f"<think>t</think>\\boxed{{{call.sample_index}}} final {call.sample_index}",
        completion_tokens=2,
    )


def widths(client: FakeChatClient) -> list[int]:
    """Samples per distinct prompt, in order of first appearance."""
    seen: dict[str, int] = {}
    for call in client.calls:
        seen[call.last_user] = seen.get(call.last_user, 0) + 1
    return list(seen.values())


async def test_rounds_and_preset_per_run() -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4, 1]))
    out = await graph.ainvoke(QUESTION, {"configurable": {"rounds": [3]}})
    assert widths(client) == [3, 1]
    assert out["result"].schedule == (3, 1)
    client.calls.clear()
    out = await graph.ainvoke(QUESTION, {"configurable": {"preset": "high"}})
    assert widths(client) == [32, 4, 1]
    assert out["result"].preset == "high"
    client.calls.clear()
    out = await graph.ainvoke(QUESTION)  # the graph's own shape again
    assert widths(client) == [4, 1, 1]
    assert out["result"].schedule == (4, 1, 1)


async def test_sampling_settings_per_run_reach_the_model() -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    configurable = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 77, "seed": 5}
    out = await graph.ainvoke(QUESTION, {"configurable": configurable})
    params = {(c.params.temperature, c.params.top_p, c.params.max_tokens) for c in client.calls}
    assert params == {(0.3, 0.9, 77)}
    assert {c.seed for c in client.calls} == {5, 1005}  # batched: one seed per round request
    assert out["result"].extra["sampling"]["temperature"] == 0.3
    client.calls.clear()
    await graph.ainvoke(QUESTION)
    assert {c.params.temperature for c in client.calls} == {1.0}


async def test_compactor_per_run() -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    out = await graph.ainvoke(QUESTION, {"configurable": {"compactor": "answer"}})
    assert [t.message for t in out["result"].rounds[0]] == ["\\boxed{0}", "\\boxed{1}"]
    out = await graph.ainvoke(QUESTION)
    assert [t.message for t in out["result"].rounds[0]] == [
        "\\boxed{0} final 0",
        "\\boxed{1} final 1",
    ]


@pytest.mark.parametrize(
    ("configurable", "field"),
    [
        ({"rounds": [3, 0]}, "configurable.rounds"),
        ({"rounds": "3"}, "configurable.rounds"),
        ({"temperature": 7}, "configurable.temperature"),
        ({"top_p": 0}, "configurable.top_p"),
        ({"max_tokens": 0}, "configurable.max_tokens"),
        ({"preset": "extreme"}, "configurable.preset"),
        ({"compactor": "nope"}, "configurable.compactor"),
        ({"preset": "low", "rounds": [2]}, "preset or rounds"),
    ],
)
async def test_a_bad_setting_fails_that_run_naming_the_field(
    configurable: dict[str, Any], field: str
) -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    with pytest.raises(SettingsError, match=field.replace(".", r"\.")):
        await graph.ainvoke(QUESTION, {"configurable": configurable})
    assert client.calls == []  # before any model call
    await graph.ainvoke(QUESTION)  # the graph is fine for the next run


def test_unrelated_configurable_keys_are_ignored() -> None:
    base = PaCoReConfig(rounds=[2])
    cfg, compactor = resolve_settings(base, {"thread_id": "t", "checkpoint_ns": "", "x": 1})
    assert cfg is base and compactor is None
