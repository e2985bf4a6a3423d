"""Plug your own explorer subgraph into PaCoRe: draft, then self-check.

Each of the K parallel explorers of a round runs this two-node LangGraph
graph instead of a single chat call: ``draft`` answers the round's prompt,
``check`` asks the model to verify the draft and give the final answer. The
explorer graph's input is ``{"task": ExploreTask}`` and its output must hold
a ``trajectory``; ``GraphExplorer`` plugs it in. PaCoRe runs it as a real
subgraph: it shows in ``get_graph(xray=True)``, its steps stream with
``astream(subgraphs=True)``, and it is held to the run's concurrency limit
and sampling settings (``task.params``, ``task.seed``).

    python examples/custom_explorer.py                                   # embedded model
    python examples/custom_explorer.py --base-url http://localhost:8000/v1 --model pacore-8b
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from pacore_graph import (
    ExploreTask,
    GraphExplorer,
    OpenAICompatClient,
    PaCoReConfig,
    SamplingParams,
    Trajectory,
    build_pacore_graph,
)
from pacore_graph.embedded import model_endpoint

CHECK_PROMPT = (
    "Here is a draft answer to the problem above:\n\n{draft}\n\n"
    "Check it step by step. Then give the final answer on the last line."
)


class DraftCheckState(TypedDict, total=False):
    task: ExploreTask
    draft: str
    draft_tokens: int
    trajectory: Trajectory


def build_draft_check_explorer(client: OpenAICompatClient) -> GraphExplorer:
    """A two-node explorer graph: draft, then self-check."""

    async def draft(state: DraftCheckState, config: RunnableConfig) -> dict[str, Any]:
        task = state["task"]
        assert task.params is not None  # PaCoRe always sends the run's sampling settings
        (reply,) = await client.complete(task.messages, params=task.params, seed=task.seed)
        return {"draft": reply.content, "draft_tokens": reply.completion_tokens}

    async def check(state: DraftCheckState, config: RunnableConfig) -> dict[str, Any]:
        task = state["task"]
        assert task.params is not None
        messages = [
            *task.messages,
            {"role": "assistant", "content": state["draft"]},
            {"role": "user", "content": CHECK_PROMPT.format(draft=state["draft"])},
        ]
        (reply,) = await client.complete(messages, params=task.params, seed=task.seed)
        return {
            "trajectory": Trajectory(
                round=task.round,
                index=task.index,
                content=reply.content,
                reasoning=f"draft: {state['draft']}",
                finish_reason=reply.finish_reason,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=state["draft_tokens"] + reply.completion_tokens,
                references=task.references,
            )
        }

    graph = StateGraph(DraftCheckState)
    graph.add_node("draft", draft)
    graph.add_node("check", check)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "check")
    graph.add_edge("check", END)
    return GraphExplorer(graph.compile(name="draft_check"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question", nargs="?", default="What is 17 + 25?")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--rounds", default="3", help="round widths, e.g. 4,2")
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    async with model_endpoint(args.base_url, args.model) as (base_url, model):
        client = OpenAICompatClient(base_url, model)
        config = PaCoReConfig(
            rounds=[int(k) for k in args.rounds.split(",")],
            sampling=SamplingParams(max_tokens=args.max_tokens),
            max_concurrency=4,
        )
        graph = build_pacore_graph(
            explorer=build_draft_check_explorer(client), config=config, tracing=False
        )
        print(graph.get_graph(xray=True).draw_mermaid())
        steps: list[str] = []
        final: dict[str, Any] = {}
        async for namespace, mode, data in graph.astream(
            {"messages": [{"role": "user", "content": args.question}]},
            stream_mode=["updates", "values"],
            subgraphs=True,
        ):
            if mode == "updates" and namespace:  # a step inside one explorer's subgraph
                steps.extend(data)
            elif mode == "values" and not namespace:
                final = data
        await client.aclose()
    result = final["result"]
    print(f"explorer steps streamed: {steps.count('draft')} draft, {steps.count('check')} check")
    print(f"rounds: {[len(r) for r in result.rounds]}, effective TTC {result.effective_ttc}")
    print("answer:", result.answer.strip())


if __name__ == "__main__":
    asyncio.run(main())
