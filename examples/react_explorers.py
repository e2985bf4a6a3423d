"""Tool-using agents as PaCoRe's explorers: ``create_agent(model, tools)`` as it is.

Any compiled graph whose state has ``messages`` is an explorer: it receives
the round's prompt as its messages, and its last AI message is the
trajectory's answer (with its tokens from the messages' usage and every tool
call recorded). Here each of the K explorers is a LangChain agent with a
calculator; the rounds then synthesise their answers as PaCoRe does.

    python examples/react_explorers.py                                   # embedded model
    python examples/react_explorers.py --base-url http://localhost:8000/v1 --model qwen3-4b
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import operator

from langchain.agents import create_agent
from langchain_core.tools import tool

from pacore_graph import (
    PaCoReConfig,
    aclose_chat_model,
    ainvoke_pacore,
    build_pacore_graph,
    make_chat_model,
)
from pacore_graph.embedded import model_endpoint

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("only integers with + - * are allowed")


@tool
def calculate(expression: str) -> str:
    """Evaluate an integer expression with + - * such as '17 + 25'."""
    try:
        return str(_value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError) as exc:
        return f"cannot calculate {expression!r}: {exc}"


async def main(args: argparse.Namespace) -> None:
    async with model_endpoint(args.base_url, args.model) as (base_url, model_name):
        model = make_chat_model(base_url, model_name, max_tokens=args.max_tokens)
        agent = create_agent(model, [calculate], name="calculator_agent")
        graph = build_pacore_graph(config=PaCoReConfig(rounds=[3]), explorer=agent)
        try:
            result = await ainvoke_pacore(graph, args.question)
        finally:
            await aclose_chat_model(model)
    for t in result.rounds[0]:
        calls = ", ".join(f"{c.name}({dict(c.arguments)}) = {c.output}" for c in t.tool_calls)
        print(f"explorer {t.index}: {t.completion_tokens} tokens, tools: {calls or 'none'}")
    print("answer:", result.answer.strip())
    print("effective TTC:", result.effective_ttc)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What is 17 + 25?")
    parser.add_argument("--base-url", help="an OpenAI-compatible /v1 URL (default: embedded)")
    parser.add_argument("--model", help="the served model")
    parser.add_argument("--max-tokens", type=int, default=256)
    asyncio.run(main(parser.parse_args()))
