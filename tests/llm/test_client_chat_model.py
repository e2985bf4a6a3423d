"""ClientChatModel: a LangChain chat model over our own client, tools and all, over real HTTP.

The scripted server answers by input: asked with tools and no tool result in
the conversation yet, it calls ``add``; once a result is there, it answers
with it. So a tool loop over this model runs against a real server, through
the client's retries and accounting.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from llm_support import FAST_RETRY, direct

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import ModelCallError
from pacore_graph.graph.tool_explorer import build_tool_explorer, static_tools
from pacore_graph.llm.client_chat_model import ClientChatModel
from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adder(req: ScriptedRequest) -> ScriptedReply:
    """Calls add while tools are offered and no result came back; then answers with it."""
    results = [m for m in req.messages if m.get("role") == "tool"]
    if req.params.get("tools") and not results:
        return ScriptedReply(
            content="",
            reasoning="need a sum",
            tool_calls=(ScriptedToolCall("add", {"a": 2, "b": 3}),),
        )
    if results:
        return ScriptedReply(content=f"\\boxed{{{results[-1]['content']}}}", reasoning="done")
    return ScriptedReply(content=f"plain answer to {req.last_user}")


async def test_tool_calls_go_out_and_come_back_through_our_client() -> None:
    async with ScriptedServer(adder) as srv, direct(srv.base_url) as client:
        model = ClientChatModel(client=client, params=SamplingParams(temperature=0.3))
        bound = model.bind_tools([add])
        first = await bound.ainvoke([HumanMessage("2+3?")], seed=7, max_tokens=50)
        assert isinstance(first, AIMessage)
        assert [(c["name"], c["args"]) for c in first.tool_calls] == [("add", {"a": 2, "b": 3})]
        assert first.additional_kwargs["reasoning_content"] == "need a sum"
        assert first.response_metadata["finish_reason"] == "tool_calls"
        assert first.usage_metadata is not None
        assert first.usage_metadata["output_tokens"] == 3  # the scripted server counts words
        result = ToolMessage("5", tool_call_id=first.tool_calls[0]["id"])
        second = await bound.ainvoke([HumanMessage("2+3?"), first, result])
        plain = await model.ainvoke([HumanMessage("hi")])
        bodies = [r.body for r in srv.requests]
    assert second.content == "\\boxed{5}" and not second.tool_calls
    assert plain.content == "plain answer to hi"
    # The request: the tools' schema, the sampling given at call time over the model's.
    assert bodies[0]["tools"][0]["function"]["name"] == "add"
    assert (bodies[0]["temperature"], bodies[0]["seed"], bodies[0]["max_tokens"]) == (0.3, 7, 50)
    # The conversation is sent back in OpenAI's shape: the call and its result.
    sent = bodies[1]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "add"
    assert sent[2] == {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "content": "5"}
    assert "tools" not in bodies[2] and "seed" not in bodies[2]


async def test_the_project_tool_loop_runs_over_our_client() -> None:
    """``build_tool_explorer`` (a model <-> ToolNode subgraph) driven by ClientChatModel."""
    async with ScriptedServer(adder) as srv, direct(srv.base_url) as client:
        model = ClientChatModel(client=client)
        explorer = build_tool_explorer(model, static_tools([add]))
        graph = build_pacore_graph(explorer=explorer, config=PaCoReConfig(rounds=[2]))
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "2+3?"}]})
        requests = len(srv.requests)
    assert out["answer"] == "\\boxed{5}"
    trajectories = out["result"].trajectories
    assert all(t.tool_calls[0].output == "5" for t in trajectories)
    assert all(t.completion_tokens == 3 + 2 for t in trajectories)  # both calls counted
    assert all(t.reasoning == "need a sum\ndone" for t in trajectories)
    assert requests == 2 * len(trajectories)


async def test_a_failed_call_is_retried_by_the_client_then_raised() -> None:
    async with ScriptedServer(adder, fail_first=1) as srv, direct(srv.base_url) as client:
        got = await ClientChatModel(client=client).ainvoke([HumanMessage("again")])
        assert got.content == "plain answer to again"
        assert [r.status for r in srv.requests] == [500, 200]  # our client's retry
    async with (
        ScriptedServer(adder, fail_when=lambda req: 400) as srv,
        direct(srv.base_url, retry=FAST_RETRY) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await ClientChatModel(client=client).ainvoke([HumanMessage("bad")])
    assert info.value.status == 400


async def test_a_call_with_unreadable_arguments_is_an_invalid_tool_call() -> None:
    def garbled(req: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(content="", tool_calls=(ScriptedToolCall("add", "{not json"),))

    async with ScriptedServer(garbled) as srv, direct(srv.base_url) as client:
        got = await ClientChatModel(client=client).bind_tools([add]).ainvoke([HumanMessage("x")])
    assert isinstance(got, AIMessage)
    assert got.tool_calls == []
    assert [c["name"] for c in got.invalid_tool_calls] == ["add"]


async def test_the_limiter_is_held_for_each_call() -> None:
    seen: list[int] = []
    limiter = SequenceLimiter(1)

    def watch(req: ScriptedRequest) -> str:
        seen.append(limiter.in_use())
        return "ok"

    async with ScriptedServer(watch) as srv, direct(srv.base_url) as client:
        model = ClientChatModel(client=client, limiter=limiter)
        await model.ainvoke([HumanMessage("x")])
    assert seen == [1] and limiter.in_use() == 0


def test_unknown_call_arguments_and_sync_calls_are_refused() -> None:
    model = ClientChatModel(client=object())
    with pytest.raises(TypeError, match="no call argument"):
        model._call_params(None, {"frequency_penalty": 1.0})
    with pytest.raises(NotImplementedError, match="ainvoke"):
        model.invoke("x")


def test_bound_settings_reach_the_request_fields() -> None:
    model = ClientChatModel(client=object(), params=SamplingParams(extra_body={"top_k": 5}))
    kwargs: dict[str, Any] = {"tools": [{"type": "function"}], "tool_choice": "auto", "top_p": 0.5}
    params = model._call_params(["END"], {**kwargs, "ls_structured_output_format": {}})
    assert params.request_fields() == {
        "temperature": 1.0,
        "top_p": 0.5,
        "top_k": 5,
        "tools": [{"type": "function"}],
        "tool_choice": "auto",
        "stop": ["END"],
    }
    assert model.params.extra_body == {"top_k": 5}  # the model's own settings untouched
