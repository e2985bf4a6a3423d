"""Per-round models and sampling: a small model explores hot, a large one synthesises cool.

Each item of ``rounds`` may be a ``Round`` with its own ``temperature``,
``top_p``, ``max_tokens`` and ``model`` (the model name that round's
requests carry); ``final`` sets the answer round's. A round's K samples are
still one ``n=K`` request; each trajectory records what it used.

    python examples/per_round_models.py                                  # embedded model
    python examples/per_round_models.py --base-url http://localhost:8000/v1 \\
        --small qwen3-4b --large qwen3-32b
"""

from __future__ import annotations

import argparse
import asyncio

from pacore_graph import OpenAICompatClient, PaCoReConfig, Round, ainvoke_pacore, build_pacore_graph
from pacore_graph.embedded import model_endpoint


async def main(args: argparse.Namespace) -> None:
    async with model_endpoint(args.base_url, args.model) as (base_url, model):
        small, large = args.small or model, args.large or model
        config = PaCoReConfig(
            rounds=[Round(4, temperature=1.0, model=small), Round(2, temperature=0.8, model=small)],
            final=Round(1, temperature=0.2, model=large, max_tokens=args.max_tokens),
        )
        client = OpenAICompatClient(base_url, model)
        try:
            graph = build_pacore_graph(client, config=config)
            result = await ainvoke_pacore(graph, args.question)
        finally:
            await client.aclose()
    for r, trajectories in enumerate(result.rounds):
        used = trajectories[0].sampling or {}
        print(
            f"round {r}: {len(trajectories)} x {used.get('model')} "
            f"at temperature {used.get('temperature')}"
        )
    print("answer:", result.answer.strip())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What is 17 + 25?")
    parser.add_argument("--base-url", help="an OpenAI-compatible /v1 URL (default: embedded)")
    parser.add_argument("--model", help="the served model (the default of both below)")
    parser.add_argument("--small", help="the exploring rounds' model")
    parser.add_argument("--large", help="the answer round's model")
    parser.add_argument("--max-tokens", type=int, default=256)
    asyncio.run(main(parser.parse_args()))
