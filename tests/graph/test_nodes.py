"""The graph's nodes called one by one, with no graph around them (graph/nodes).

Each test hands a node the state the previous node produced and checks its
partial update; the whole graph is test_builder.py's. The explorer answers by
its input (the prompt and its own index), as any plugged-in explorer may.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from pacore_graph.errors import RoundFailedError
from pacore_graph.graph.explorer import ExploreTask, failed_trajectory
from pacore_graph.graph.nodes import PaCoReNodes, normalize_conversation
from pacore_graph.otel.spans import RunTracer, TraceOptions
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.values.compaction import compactor_from_name
from pacore_graph.values.records import Trajectory
from pacore_graph.values.seeds import explorer_seed

FAIL_ODD = "(odd explorers fail)"
FAIL_ALL = "(every explorer fails)"


class ByInput:
    """Answers from the task: its index, and whether the question asks it to fail."""

    async def explore(self, task: ExploreTask, config: Any) -> Trajectory:
        question = str(task.messages[-1]["content"])
        if FAIL_ALL in question or (FAIL_ODD in question and task.index % 2):
            return failed_trajectory(task, "HTTP 500: scripted")
        return Trajectory(
            round=task.round,
            index=task.index,
            content=f"<think>work {task.index}</think>explorer {task.index} says {task.round}",
            reasoning=f"reasoning {task.index}",
            completion_tokens=10 + task.index,
            references=task.references,
        )


def make_nodes(config: PaCoReConfig) -> PaCoReNodes:
    return PaCoReNodes(
        config=config,
        compactor=compactor_from_name("conclusion"),
        explorer=ByInput(),
        tracer=RunTracer(TraceOptions(enabled=False), config=config, model=None),
    )


async def run_round(nodes: PaCoReNodes, state: dict[str, Any]) -> dict[str, Any]:
    """round -> fan_out -> explore (each Send) -> compact, applied to ``state``."""
    state.update(await nodes.round_node(state, {}))  # type: ignore[arg-type]
    pending: list[Trajectory] = []
    for send in await nodes.fan_out(state):  # type: ignore[arg-type]
        pending += (await nodes.explore(send.arg, {}))["pending"]
    state["pending"] = pending
    state.update(await nodes.compact(state, {}))  # type: ignore[arg-type]
    return state


async def started(nodes: PaCoReNodes, question: str, context: Any = None) -> dict[str, Any]:
    state: dict[str, Any] = {"messages": [{"role": "user", "content": question}]}
    runtime = Runtime(context=context)
    state.update(await nodes.prepare(state, {}, runtime))  # type: ignore[arg-type]
    return state


# --------------------------------------------------------------------------- problem


def test_normalize_conversation_takes_langchain_messages_dicts_and_text_blocks() -> None:
    picture = {"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}}
    blocks = [{"type": "text", "text": "What is "}, picture, {"type": "text", "text": "2+2?"}]
    convo = normalize_conversation([SystemMessage("be brief"), HumanMessage(blocks)])
    assert convo == [  # the problem's text blocks, joined; the picture is not text
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "What is 2+2?"},
    ]
    assert normalize_conversation([{"role": "user", "content": "Q"}]) == [
        {"role": "user", "content": "Q"}
    ]


@pytest.mark.parametrize("messages", [[], [{"role": "user", "content": "  \n"}]])
def test_a_problem_without_text_is_refused(messages: list[Any]) -> None:
    with pytest.raises(ValueError, match="empty problem"):
        normalize_conversation(messages)


# --------------------------------------------------------------------------- nodes


async def test_prepare_opens_the_run_and_keeps_per_run_settings_apart() -> None:
    config = PaCoReConfig(rounds=[2])
    nodes = make_nodes(config)
    state = await started(nodes, "Q")
    assert (state["round"], state["rounds"], state["pending"]) == (0, (), None)
    assert state["conversation"] == ({"role": "user", "content": "Q"},)
    assert "settings" not in state  # the graph's own shape
    assert nodes.run_schedule(state) == config.schedule

    per_run = await started(nodes, "Q", {"rounds": [3, 2]})
    assert per_run["run_id"] != state["run_id"]
    assert nodes.run_schedule(per_run) == PaCoReConfig(rounds=[3, 2]).schedule


async def test_fan_out_gives_each_explorer_its_index_and_seed() -> None:
    config = PaCoReConfig(rounds=[3, 2], sampling=SamplingParams(seed=40))
    nodes = make_nodes(config)
    state = await started(nodes, "Q")
    for r, width in enumerate(config.schedule):
        state.update(await nodes.round_node(state, {}))  # type: ignore[arg-type]
        tasks = [send.arg for send in await nodes.fan_out(state)]  # type: ignore[arg-type]
        assert all(isinstance(t, ExploreTask) for t in tasks)  # one Send per explorer
        assert [t.index for t in tasks] == list(range(width))
        assert [t.seed for t in tasks] == [explorer_seed(40, r, i) for i in range(width)]
        assert all(t.params == config.sampling for t in tasks)
        # only the final K=1 round streams its tokens
        assert {t.stream for t in tasks} == {r == len(config.schedule) - 1}
        state["round"] = r + 1
        state["rounds"] = (*state["rounds"], ())


async def test_the_next_round_reads_only_the_messages_that_came_back() -> None:
    nodes = make_nodes(PaCoReConfig(rounds=[4]))
    state = await run_round(nodes, await started(nodes, f"Q {FAIL_ODD}"))
    first = state["rounds"][0]
    assert [t.index for t in first] == [0, 1, 2, 3]  # sorted, failures kept as records
    assert [t.failed for t in first] == [i % 2 == 1 for i in range(4)]
    assert all(t.message is None for t in first if t.failed)
    assert [t.message for t in first if not t.failed] == ["explorer 0 says 0", "explorer 2 says 0"]
    assert state["round"] == 1

    update = await nodes.round_node(state, {})  # type: ignore[arg-type]
    (prompt,) = update["plan"].prompts  # one prompt, shared by the round's explorers
    assert sorted(prompt.references) == [t.index for t in first if not t.failed]
    prompt_text = str(prompt.messages[-1]["content"])
    for t in first:
        if not t.failed:
            assert t.message in prompt_text
    assert "work 0" not in prompt_text  # the compacted message, not the raw thinking


async def test_a_round_where_every_call_failed_fails_the_run_with_the_errors() -> None:
    nodes = make_nodes(PaCoReConfig(rounds=[3]))
    with pytest.raises(RoundFailedError, match="all 3 explorer calls failed") as caught:
        await run_round(nodes, await started(nodes, f"Q {FAIL_ALL}"))
    assert caught.value.errors == ["HTTP 500: scripted"] * 3


async def test_route_and_finalize_give_the_final_rounds_message() -> None:
    config = PaCoReConfig(rounds=[2])
    nodes = make_nodes(config)
    state = await started(nodes, "Q")
    routes = []
    while (where := await nodes.route(state)) == "round":  # type: ignore[arg-type]
        routes.append(where)
        state = await run_round(nodes, state)
    assert len(routes) == len(config.schedule)
    out = await nodes.finalize(state, {})  # type: ignore[arg-type]
    final_round = len(config.schedule) - 1
    assert out["answer"] == f"explorer 0 says {final_round}"
    result = out["result"]
    assert result.schedule == config.schedule
    assert [len(rnd) for rnd in result.rounds] == list(config.schedule)
    assert result.effective_ttc == sum(t.completion_tokens for t in result.trajectories)
    (reply,) = out["messages"]
    assert reply.content == out["answer"] and reply.name == nodes.name
    assert reply.additional_kwargs["reasoning_content"] == result.final.reasoning
