"""Explorers as units: one task in, one trajectory out, a failed call recorded, never raised.

The plain explorer talks to the scripted server over loopback HTTP; the graph
explorer runs a real compiled LangGraph graph. The graph-level behaviour
(rounds, subgraphs in xray, streaming) is in test_builder.py and
test_tool_explorer.py.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pacore_graph import RoundFailedError, build_pacore_graph
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.explorer import (
    ChatExplorer,
    ExploreGroup,
    Explorer,
    ExploreTask,
    GraphExplorer,
    failed_trajectory,
)
from pacore_graph.llm.batching import SampleBatcher
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedRequest, ScriptedServer
from pacore_graph.values.records import Trajectory
from pacore_graph.values.seeds import explorer_seed

ONE_TRY = ModelRetryPolicy(max_attempts=1)
PARAMS = SamplingParams(max_tokens=64)


def answer(req: ScriptedRequest) -> str:
    return f"seed {req.seed} read {req.last_user!r}: \\boxed{{4}}"


def fail_on_request(req: ScriptedRequest) -> int | None:
    return 500 if "please fail" in req.last_user else None


def task(question: str, *, round_index: int = 1, index: int = 2, **kw: Any) -> ExploreTask:
    values: dict[str, Any] = {
        "run_id": "run-1",
        "problem_id": "p",
        "round": round_index,
        "index": index,
        "width": 1,
        "messages": ({"role": "user", "content": question},),
        "references": (0, 3),
        "seed": explorer_seed(11, round_index, index),
    }
    values.update(kw)
    return ExploreTask(**values)


@pytest.fixture
async def client() -> AsyncIterator[OpenAICompatClient]:
    async with ScriptedServer(answer, fail_when=fail_on_request) as srv:
        c = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
        try:
            yield c
        finally:
            await c.aclose()


def chat_explorer(client: OpenAICompatClient) -> ChatExplorer:
    return ChatExplorer(SampleBatcher(client, SequenceLimiter(4), PARAMS))


def test_tasks_and_groups_keep_tuples_and_refuse_an_empty_group() -> None:
    # A checkpointed Send comes back with lists.
    restored = task("Q", messages=[{"role": "user", "content": "Q"}], references=[1, 0])
    assert type(restored.messages) is tuple and restored.references == (1, 0)
    assert restored.group == ("run-1", restored.round)
    group = ExploreGroup([restored, task("Q", index=3)])  # type: ignore[arg-type]
    assert type(group.tasks) is tuple
    assert (group.run_id, group.round) == (restored.run_id, restored.round)
    with pytest.raises(ValueError, match="at least one task"):
        ExploreGroup(())


def test_failed_trajectory_keeps_the_error_and_the_references() -> None:
    t = task("Q")
    failed = failed_trajectory(t, TimeoutError("no answer in 5 s"), latency_s=5.0)
    assert failed.failed and failed.message is None and failed.content == ""
    assert failed.error == "TimeoutError: no answer in 5 s"
    assert (failed.round, failed.index, failed.references) == (t.round, t.index, t.references)
    assert failed_trajectory(t, "as given").error == "as given"


async def test_chat_explorer_returns_its_own_trajectory(client: OpenAICompatClient) -> None:
    explorer = chat_explorer(client)
    assert isinstance(explorer, Explorer)
    t = task("What is 2+2?")
    out = await explorer.explore(t, {})
    assert not out.failed
    assert (out.round, out.index, out.references) == (t.round, t.index, t.references)
    # The server answered this explorer's prompt, sent with this explorer's seed.
    assert out.content == f"seed {t.seed} read 'What is 2+2?': \\boxed{{4}}"
    assert out.completion_tokens > 0 and out.finish_reason == "stop"


async def test_chat_explorer_records_a_failed_call(client: OpenAICompatClient) -> None:
    t = task("please fail")
    out = await chat_explorer(client).explore(t, {})
    assert out.failed and out.message is None and out.content == ""
    assert out.error is not None and "500" in out.error
    assert out.references == t.references


class LoopState(TypedDict, total=False):
    task: ExploreTask
    trajectory: Trajectory


def one_call_graph(client: OpenAICompatClient, *, returns_trajectory: bool = True) -> Any:
    """A one-node explorer graph that asks the model once."""

    async def call(state: LoopState) -> dict[str, Any]:
        t = state["task"]
        (c,) = await client.complete(t.messages, params=PARAMS, seed=t.seed)
        if not returns_trajectory:
            return {}
        trajectory = Trajectory(round=t.round, index=t.index, content=c.content, message="4")
        return {"trajectory": trajectory}

    builder = StateGraph(LoopState)
    builder.add_node("call", call)
    builder.add_edge(START, "call")
    builder.add_edge("call", END)
    return builder.compile(name="one_call")


async def test_graph_explorer_runs_the_graph_and_always_releases(
    client: OpenAICompatClient,
) -> None:
    released: list[tuple[int, int]] = []

    async def release(t: ExploreTask) -> None:
        released.append((t.round, t.index))

    explorer = GraphExplorer(one_call_graph(client), release=release)
    assert explorer.name == "one_call"
    ok = await explorer.explore(task("What is 2+2?", index=0), {})
    assert not ok.failed and ok.content.startswith(f"seed {explorer_seed(11, 1, 0)} ")
    failed = await explorer.explore(task("please fail", index=1), {})
    assert failed.failed and failed.error is not None and "500" in failed.error
    assert released == [(1, 0), (1, 1)]  # after success and after failure alike


async def test_graph_explorer_without_a_trajectory_is_a_programming_error(
    client: OpenAICompatClient,
) -> None:
    explorer = GraphExplorer(one_call_graph(client, returns_trajectory=False))
    with pytest.raises(TypeError, match="'trajectory' key"):
        await explorer.explore(task("Q"), {})
    with pytest.raises(TypeError, match="compiled LangGraph graph"):
        GraphExplorer(object())


# ------------------------------------------------- a round's one request, straight


class StackAtPost(OpenAICompatClient):
    """The direct client, noting the call stack and task of every POST it makes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.posts: list[tuple[int, list[str], asyncio.Task[Any] | None]] = []

    async def _post(self, body: Any, timeout: float) -> Any:
        stack = [f"{Path(f.filename).name}:{f.name}" for f in traceback.extract_stack()]
        self.posts.append((int(body.get("n", 1)), stack, asyncio.current_task()))
        return await super()._post(body, timeout)


async def test_a_rounds_samples_are_one_request_sent_from_the_explore_node() -> None:
    """Issue 33: no split into K calls and regroup by a timer; the POST is a plain call down
    from the explore node, so its stack names the node and the explorer."""
    async with (
        ScriptedServer(answer) as srv,
        StackAtPost(srv.base_url, "scripted", retry=ONE_TRY) as client,
    ):
        graph = build_pacore_graph(client=client, config={"rounds": [4, 3]}, tracing=False)
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "2+2?"}]})
    assert out["answer"]
    assert [n for n, _, _ in client.posts] == [4, 3, 1]
    _, stack, _ = client.posts[0]
    down = stack[stack.index("nodes.py:explore") :]  # the node's frame is in the POST's stack
    assert down[:4] == [
        "nodes.py:explore",
        "nodes.py:_through_journal",
        "nodes.py:_explore_tasks",
        "explorer.py:explore_round",
    ]
    assert down[-1] == "test_explorer.py:_post" and len(down) <= 13
    assert not any("batching.py" in frame for frame in stack)  # no batcher on the way


async def test_a_failed_calls_traceback_names_its_node_and_explorer(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Every explorer of the failed request records the error with a traceback that shows
    the node and the explorer's frames and says which round's request it was."""
    provider, exporter = traced

    def fail_round_0(req: ScriptedRequest) -> int | None:
        return 400 if "Round" not in req.last_user and "2+2" in req.last_user else None

    async with (
        ScriptedServer(answer, fail_when=fail_round_0) as srv,
        OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY) as client,
    ):
        graph = build_pacore_graph(
            client=client, config={"rounds": [3]}, tracing=TraceOptions(tracer_provider=provider)
        )
        with pytest.raises(RoundFailedError) as failed:
            await graph.ainvoke({"messages": [{"role": "user", "content": "2+2?"}]})
    assert "HTTP 400" in str(failed.value)
    explorers = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(explorers) == 3
    for span in explorers:
        (event,) = [e for e in span.events if e.name == "exception"]
        stack = str((event.attributes or {})["exception.stacktrace"])
        assert "in _explore_one" in stack and "in _shared_sample" in stack  # node, explorer
        assert "in _post" in stack  # down to the HTTP call
        assert "n=3 request for round 0" in stack and "explorers 0-2" in stack
        assert (span.attributes or {})["error.type"] == "400"
