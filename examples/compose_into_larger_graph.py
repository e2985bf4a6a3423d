"""Compose PaCoRe into a larger agent workflow.

A user's support bot routes hard questions to PaCoRe and easy ones to a
single model call, then formats the reply. The compiled PaCoRe graph is an
ordinary LangGraph node: it reads ``messages`` and appends its answer.

    python examples/compose_into_larger_graph.py                       # embedded model
    python examples/compose_into_larger_graph.py \
        --base-url http://localhost:8000/v1 --model pacore-8b
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from pacore_graph import OpenAICompatClient, PaCoReConfig, SamplingParams, build_pacore_graph
from pacore_graph.embedded import model_endpoint


class BotState(MessagesState):
    route: str
    answer: str


def build_bot(client: OpenAICompatClient, max_tokens: int | None) -> Any:
    pacore = build_pacore_graph(
        client,
        config=PaCoReConfig(rounds=[4], sampling=SamplingParams(max_tokens=max_tokens)),
    )

    async def classify(state: BotState) -> dict[str, Any]:
        question = str(state["messages"][-1].content)
        return {"route": "hard" if len(question.split()) > 3 else "easy"}

    async def quick(state: BotState) -> dict[str, Any]:
        (c,) = await client.complete(
            [{"role": "user", "content": str(state["messages"][-1].content)}],
            params=SamplingParams(max_tokens=max_tokens),
        )
        return {"answer": c.content, "messages": [AIMessage(c.content)]}

    async def sign(state: BotState) -> dict[str, Any]:
        return {"answer": f"{state['answer'].strip()}\n-- answered by the {state['route']} path"}

    bot = StateGraph(BotState)
    bot.add_node("classify", classify)
    bot.add_node("pacore", pacore)  # the whole PaCoRe graph as one node
    bot.add_node("quick", quick)
    bot.add_node("sign", sign)
    bot.add_edge(START, "classify")
    bot.add_conditional_edges("classify", lambda s: "pacore" if s["route"] == "hard" else "quick")
    bot.add_edge("pacore", "sign")
    bot.add_edge("quick", "sign")
    bot.add_edge("sign", END)
    return bot.compile()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="pacore-8b")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("question", nargs="?", default="What is the sum of 17 and 25?")
    args = parser.parse_args()
    async with model_endpoint(args.base_url, args.model) as (base_url, model):
        client = OpenAICompatClient(base_url, model)
        bot = build_bot(client, args.max_tokens)
        out = await bot.ainvoke({"messages": [HumanMessage(args.question)]})
        await client.aclose()
    print(out["answer"])
    print(f"conversation: {[m.type for m in out['messages']]}")


if __name__ == "__main__":
    asyncio.run(main())
