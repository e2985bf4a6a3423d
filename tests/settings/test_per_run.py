"""Per-run settings from ``config["configurable"]``: one built graph, many run shapes."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.graph.compaction import AnswerCompactor
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.graph.seeds import explorer_seed
from pacore_graph.settings.per_run import SettingsError, resolve_settings
from pacore_graph.settings.request_limits import RequestLimits
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
    per_run = PaCoReConfig(rounds=[3]).schedule  # the configured widths and the final K=1
    assert widths(client) == list(per_run)
    assert out["result"].schedule == per_run
    client.calls.clear()
    out = await graph.ainvoke(QUESTION, {"configurable": {"preset": "high"}})
    assert widths(client) == list(PaCoReConfig.from_preset("high").schedule)
    assert out["result"].preset == "high"
    client.calls.clear()
    out = await graph.ainvoke(QUESTION)  # the graph's own shape again
    own = PaCoReConfig(rounds=[4, 1]).schedule
    assert widths(client) == list(own)
    assert out["result"].schedule == own


async def test_sampling_settings_per_run_reach_the_model() -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    configurable = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 77, "seed": 5}
    out = await graph.ainvoke(QUESTION, {"configurable": configurable})
    params = {(c.params.temperature, c.params.top_p, c.params.max_tokens) for c in client.calls}
    assert params == {(0.3, 0.9, 77)}
    # batched: one request per round, carrying the seed of the round's first explorer
    rounds = range(len(out["result"].schedule))
    assert {c.seed for c in client.calls} == {explorer_seed(5, r, 0) for r in rounds}
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
        ({"seed": 10**30}, "configurable.seed"),
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


# ------------------------------------------------------------- nothing is imported


@pytest.mark.parametrize("spec", ["this:x", "sys:exit", "faulthandler:dump_traceback"])
async def test_a_run_cannot_import_code_through_its_compactor(spec: str) -> None:
    """``module:attr`` from a caller is refused naming the field; nothing is imported or run."""
    sys.modules.pop("this", None)  # importing it prints the Zen of Python
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    with pytest.raises(SettingsError, match=r"configurable\.compactor: .*not offered"):
        await graph.ainvoke(QUESTION, {"configurable": {"compactor": spec}})
    assert "this" not in sys.modules
    assert client.calls == []


def test_resolving_a_request_name_never_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = "class C:\n    name = 'c'\n\n    def compact(self, trajectory):\n        return ''\n"
    (tmp_path / "pacore_probe_module.py").write_text(probe)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SettingsError, match=r"configurable\.compactor"):
        resolve_settings(PaCoReConfig(), {"compactor": "pacore_probe_module:C"})
    with pytest.raises(ValueError, match="not offered"):
        CompactorRegistry().resolve("pacore_probe_module:C")
    assert "pacore_probe_module" not in sys.modules
    # The builder (code, not a request) still takes module:attr.
    build_pacore_graph(FakeChatClient(reply=reply), compactor="pacore_probe_module:C")
    assert "pacore_probe_module" in sys.modules
    sys.modules.pop("pacore_probe_module")


async def test_a_deployment_registers_compactors_a_run_may_name() -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(
        client, config=PaCoReConfig(rounds=[2]), compactors={"short": AnswerCompactor()}
    )
    out = await graph.ainvoke(QUESTION, {"configurable": {"compactor": "short"}})
    assert [t.message for t in out["result"].rounds[0]] == ["\\boxed{0}", "\\boxed{1}"]
    out = await graph.ainvoke(QUESTION, {"configurable": {"compactor": "budget:1"}})
    assert [t.message for t in out["result"].rounds[0]] == ["[...] 0", "[...] 1"]
    with pytest.raises(SettingsError, match="short"):  # the error lists what is offered
        await graph.ainvoke(QUESTION, {"configurable": {"compactor": "long"}})


# ------------------------------------------------------------- per-run budgets


@pytest.mark.parametrize(
    ("configurable", "field", "cause"),
    [
        ({"rounds": [1] * 17}, "configurable.rounds", "at most 16"),
        ({"rounds": [1024] * 16}, "configurable.rounds", "16385 model calls; at most 4096"),
        ({"rounds": [1024] * 4}, "configurable.rounds", "4097 model calls"),
        ({"max_tokens": 10**9}, "configurable.max_tokens", "cap of 131072"),
    ],
)
async def test_a_run_over_a_budget_fails_naming_the_field(
    configurable: dict[str, Any], field: str, cause: str
) -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    with pytest.raises(SettingsError, match=rf"{re.escape(field)}: .*{re.escape(cause)}"):
        await graph.ainvoke(QUESTION, {"configurable": configurable})
    assert client.calls == []


async def test_the_deployment_sets_the_budgets() -> None:
    client = FakeChatClient(reply=reply)
    limits = RequestLimits(max_rounds=20, max_samples_per_request=30, max_tokens_cap=50)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]), limits=limits)
    # 20 rounds fit the graph's recursion limit too (3 steps per round).
    out = await graph.ainvoke(QUESTION, {"configurable": {"rounds": [1] * 20}})
    assert len(out["result"].rounds) == 21
    with pytest.raises(SettingsError, match=r"configurable\.preset: .*at most 30"):
        await graph.ainvoke(QUESTION, {"configurable": {"preset": "high"}})  # 37 calls
    with pytest.raises(SettingsError, match=r"configurable\.max_tokens"):
        await graph.ainvoke(QUESTION, {"configurable": {"max_tokens": 51}})
    await graph.ainvoke(QUESTION, {"configurable": {"max_tokens": 50, "preset": "medium"}})
