"""Per-run settings from the run's context: one built graph, many run shapes."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.settings.per_run import SettingsError, resolve_settings
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.compaction import AnswerCompactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.seeds import explorer_seed

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
    out = await graph.ainvoke(QUESTION, context={"rounds": [3]})
    per_run = PaCoReConfig(rounds=[3]).schedule  # the configured widths and the final K=1
    assert widths(client) == list(per_run)
    assert out["result"].schedule == per_run
    client.calls.clear()
    out = await graph.ainvoke(QUESTION, context={"preset": "high"})
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
    context = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 77, "seed": 5}
    out = await graph.ainvoke(QUESTION, context=context)
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
    out = await graph.ainvoke(QUESTION, context={"compactor": "answer"})
    assert [t.message for t in out["result"].rounds[0]] == ["\\boxed{0}", "\\boxed{1}"]
    out = await graph.ainvoke(QUESTION)
    assert [t.message for t in out["result"].rounds[0]] == [
        "\\boxed{0} final 0",
        "\\boxed{1} final 1",
    ]


@pytest.mark.parametrize(
    ("context", "field"),
    [
        ({"rounds": [3, 0]}, "context.rounds"),
        ({"rounds": "3"}, "context.rounds"),
        ({"temperature": 7}, "context.temperature"),
        ({"top_p": 0}, "context.top_p"),
        ({"max_tokens": 0}, "context.max_tokens"),
        ({"seed": 10**30}, "context.seed"),
        ({"preset": "extreme"}, "context.preset"),
        ({"compactor": "nope"}, "context.compactor"),
        ({"preset": "low", "rounds": [2]}, "preset or rounds"),
    ],
)
async def test_a_bad_setting_fails_that_run_naming_the_field(
    context: dict[str, Any], field: str
) -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    with pytest.raises(SettingsError, match=field.replace(".", r"\.")):
        await graph.ainvoke(QUESTION, context=context)
    assert client.calls == []  # before any model call
    await graph.ainvoke(QUESTION)  # the graph is fine for the next run


async def test_configurable_still_works_for_one_release_with_a_warning() -> None:
    """The old way (``config["configurable"]``) runs the same shape, warns, names its source."""
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4]))
    with pytest.warns(DeprecationWarning, match=r"context=.*\['rounds'\]"):
        out = await graph.ainvoke(QUESTION, {"configurable": {"rounds": [3]}})
    assert widths(client) == list(PaCoReConfig(rounds=[3]).schedule)
    assert out["result"].schedule == PaCoReConfig(rounds=[3]).schedule
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(SettingsError, match=r"configurable\.top_p"),
    ):
        await graph.ainvoke(QUESTION, {"configurable": {"top_p": 0}})
    client.calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the context (and thread ids) warn about nothing
        await graph.ainvoke(QUESTION, {"configurable": {"thread_id": "t"}}, context={"rounds": [2]})
    assert widths(client) == list(PaCoReConfig(rounds=[2]).schedule)


def test_the_context_schema_is_generated_from_the_settings_with_the_graphs_defaults() -> None:
    from pydantic import TypeAdapter

    from pacore_graph.settings.fields import SETTINGS
    from pacore_graph.settings.per_run import RUN_SETTINGS

    base = PaCoReConfig(rounds=[8, 2]).with_settings({"temperature": 0.6})
    graph = build_pacore_graph(FakeChatClient(reply=reply), config=base, compactor="answer")
    schema = graph.get_context_jsonschema()
    assert schema is not None
    props = schema["properties"]
    assert tuple(props) == RUN_SETTINGS == tuple(n for n, r in SETTINGS.items() if r.per_run)
    for name in RUN_SETTINGS:
        assert props[name]["description"] == SETTINGS[name].help
    assert props["rounds"]["default"] == [8, 2]
    assert props["temperature"]["default"] == 0.6
    assert props["compactor"]["default"] == "answer"
    temperature = next(t for t in props["temperature"]["anyOf"] if t.get("type") == "number")
    assert (temperature["minimum"], temperature["maximum"]) == (
        SETTINGS["temperature"].ge,
        SETTINGS["temperature"].le,
    )
    # the same schema the validator enforces: a value the schema bounds out fails the run
    assert TypeAdapter(graph.context_schema).json_schema()["properties"] == props


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
    with pytest.raises(SettingsError, match=r"context\.compactor: .*not offered"):
        await graph.ainvoke(QUESTION, context={"compactor": spec})
    assert "this" not in sys.modules
    assert client.calls == []


def test_resolving_a_request_name_never_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = "class C:\n    name = 'c'\n\n    def compact(self, trajectory):\n        return ''\n"
    (tmp_path / "pacore_probe_module.py").write_text(probe)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SettingsError, match=r"context\.compactor"):
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
    out = await graph.ainvoke(QUESTION, context={"compactor": "short"})
    assert [t.message for t in out["result"].rounds[0]] == ["\\boxed{0}", "\\boxed{1}"]
    out = await graph.ainvoke(QUESTION, context={"compactor": "budget:1"})
    assert [t.message for t in out["result"].rounds[0]] == ["[...] 0", "[...] 1"]
    with pytest.raises(SettingsError, match="short"):  # the error lists what is offered
        await graph.ainvoke(QUESTION, context={"compactor": "long"})


# ------------------------------------------------------------- per-run budgets


@pytest.mark.parametrize(
    ("context", "field", "cause"),
    [
        ({"rounds": [1] * 17}, "context.rounds", "at most 16"),
        ({"rounds": [1024] * 16}, "context.rounds", "16385 model calls; at most 4096"),
        ({"rounds": [1024] * 4}, "context.rounds", "4097 model calls"),
        ({"max_tokens": 10**9}, "context.max_tokens", "cap of 131072"),
    ],
)
async def test_a_run_over_a_budget_fails_naming_the_field(
    context: dict[str, Any], field: str, cause: str
) -> None:
    client = FakeChatClient(reply=reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    with pytest.raises(SettingsError, match=rf"{re.escape(field)}: .*{re.escape(cause)}"):
        await graph.ainvoke(QUESTION, context=context)
    assert client.calls == []


async def test_the_deployment_sets_the_budgets() -> None:
    client = FakeChatClient(reply=reply)
    limits = RequestLimits(max_rounds=20, max_samples_per_request=30, max_tokens_cap=50)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]), limits=limits)
    # 20 rounds fit the graph's recursion limit too (3 steps per round).
    out = await graph.ainvoke(QUESTION, context={"rounds": [1] * 20})
    assert len(out["result"].rounds) == 21
    with pytest.raises(SettingsError, match=r"context\.preset: .*at most 30"):
        await graph.ainvoke(QUESTION, context={"preset": "high"})  # 37 calls
    with pytest.raises(SettingsError, match=r"context\.max_tokens"):
        await graph.ainvoke(QUESTION, context={"max_tokens": 51})
    await graph.ainvoke(QUESTION, context={"max_tokens": 50, "preset": "medium"})
