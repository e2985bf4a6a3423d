"""Compactors are functions: a plain one, an async one, or an LLM that rewrites each message.

m = C(w) is what one trajectory passes to the next round. ``compactor=`` takes
any function ``(Trajectory) -> str``, an ``async`` one (a round's run
concurrently), or a chat model: an LLM compactor that rewrites each
trajectory into its message. Its tokens are reported apart from effective
TTC (``result.extra["compaction_tokens"]``), as a judge's are.

    python examples/llm_compactor.py                                     # embedded model
    python examples/llm_compactor.py --base-url http://localhost:8000/v1 --model qwen3-4b
"""

from __future__ import annotations

import argparse
import asyncio

from pacore_graph import (
    LLMCompactor,
    OpenAICompatClient,
    PaCoReConfig,
    SamplingParams,
    Trajectory,
    aclose_chat_model,
    ainvoke_pacore,
    build_pacore_graph,
    make_chat_model,
)
from pacore_graph.embedded import model_endpoint


def last_line(t: Trajectory) -> str:
    """A plain function: keep the attempt's last non-empty line."""
    lines = [line for line in t.content.splitlines() if line.strip()]
    return lines[-1] if lines else ""


async def main(args: argparse.Namespace) -> None:
    question = args.question
    async with model_endpoint(args.base_url, args.model) as (base_url, model):
        config = PaCoReConfig(rounds=[3], sampling=SamplingParams(max_tokens=args.max_tokens))
        client = OpenAICompatClient(base_url, model)
        summariser = make_chat_model(base_url, model, max_tokens=64)
        try:
            plain = build_pacore_graph(client, config=config, compactor=last_line)
            result = await ainvoke_pacore(plain, question)
            print("last-line messages:", [t.message for t in result.rounds[0]])

            compactor = LLMCompactor(summariser, instruction=args.instruction)
            graph = build_pacore_graph(client, config=config, compactor=compactor)
            result = await ainvoke_pacore(graph, question)
        finally:
            await client.aclose()
            await aclose_chat_model(summariser)
    for t in result.rounds[0]:
        print(f"explorer {t.index} passes on: {t.message!r}")
    print("answer:", result.answer.strip())
    print("effective TTC:", result.effective_ttc)
    print("compaction tokens (not TTC):", result.extra["compaction_tokens"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What is 17 + 25?")
    parser.add_argument("--base-url", help="an OpenAI-compatible /v1 URL (default: embedded)")
    parser.add_argument("--model", help="the served model (explorers and compactor)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument(
        "--instruction",
        default="Rewrite this attempt as two sentences: its answer, and why.",
        help="the LLM compactor's system prompt",
    )
    asyncio.run(main(parser.parse_args()))
