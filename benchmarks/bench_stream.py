"""Time to the first streamed token on the embedded model (llama.cpp + SmolLM2-135M).

A PaCoRe run shows nothing of its answer until the final K=1 round; with
``stream_mode="messages"`` the final round's tokens arrive while they are
generated. This prints, per run and as medians, the seconds from the start of
the run to its first streamed token, to the last one, and to the run's end,
and the same run's time to the answer without streaming (``ainvoke``),
measured alternately in one sitting.

    python benchmarks/bench_stream.py --repeats 3 --rounds 2 --max-tokens 96
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

QUESTION = "What is 17 + 25? Answer briefly."


async def one_streamed(graph: Any) -> dict[str, float]:
    from langchain_core.messages import AIMessageChunk

    started = time.perf_counter()
    first = last = None
    async for message, _meta in graph.astream(
        {"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="messages"
    ):
        if isinstance(message, AIMessageChunk) and message.content:
            now = time.perf_counter()
            first = first if first is not None else now
            last = now
    end = time.perf_counter()
    if first is None or last is None:
        raise RuntimeError("no token was streamed")
    return {
        "first_token_s": first - started,
        "last_token_s": last - started,
        "end_s": end - started,
    }


async def one_plain(graph: Any) -> float:
    started = time.perf_counter()
    await graph.ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
    return time.perf_counter() - started


async def main_async(args: argparse.Namespace) -> None:
    from pacore_graph import OpenAICompatClient, PaCoReConfig, build_pacore_graph
    from pacore_graph.embedded import EmbeddedServer

    config = PaCoReConfig(
        rounds=[args.rounds],
        sampling={"max_tokens": args.max_tokens, "temperature": 0.7, "seed": 1},
    )
    async with EmbeddedServer() as server:
        client = OpenAICompatClient(server.base_url, server.model)
        graph = build_pacore_graph(client, config=config, tracing=False)
        await one_plain(graph)  # warm-up: model pages, prompt cache
        streamed: list[dict[str, float]] = []
        plain: list[float] = []
        for rep in range(args.repeats):
            if rep % 2 == 0:
                streamed.append(await one_streamed(graph))
                plain.append(await one_plain(graph))
            else:
                plain.append(await one_plain(graph))
                streamed.append(await one_streamed(graph))
        await client.aclose()
    med = {k: statistics.median(r[k] for r in streamed) for k in streamed[0]}
    print(
        f"embedded {server.model}, rounds [{args.rounds}] + 1, max_tokens {args.max_tokens}, "
        f"median of {args.repeats}"
    )
    print(
        f"  streamed: first token {med['first_token_s']:.2f} s, last token "
        f"{med['last_token_s']:.2f} s, run end {med['end_s']:.2f} s"
    )
    print(f"  not streamed: answer after {statistics.median(plain):.2f} s")
    print("  runs (first token s):", " ".join(f"{r['first_token_s']:.2f}" for r in streamed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="width of the one explored round")
    parser.add_argument("--max-tokens", type=int, default=96)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
