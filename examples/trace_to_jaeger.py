"""Trace a PaCoRe run to Jaeger (or any OTLP endpoint) and find the message links.

Start Jaeger all-in-one first (it takes OTLP on 4318):

    docker run --rm -p 16686:16686 -p 4318:4318 jaegertracing/all-in-one:latest

then run this and open http://localhost:16686 (service "pacore-graph"):

    python examples/trace_to_jaeger.py                                  # embedded model
    python examples/trace_to_jaeger.py --base-url http://localhost:8000/v1 --model pacore-8b
    python examples/trace_to_jaeger.py --endpoint http://collector:4318/v1/traces

Each run is one trace: ``invoke_workflow pacore`` > ``pacore.round r`` > ``chat
{model}`` per explorer; the chat spans of round r+1 carry links to the round-r
spans whose messages they read.
"""

from __future__ import annotations

import argparse
import asyncio

from pacore_graph import (
    OpenAICompatClient,
    PaCoReConfig,
    SamplingParams,
    ainvoke_pacore,
    build_pacore_graph,
)
from pacore_graph.embedded import model_endpoint
from pacore_graph.otel.exporters import JAEGER_ENDPOINT, configure_tracing
from pacore_graph.otel.spans import TraceOptions


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="pacore-8b")
    parser.add_argument("--endpoint", default=JAEGER_ENDPOINT, help="OTLP/HTTP traces URL")
    parser.add_argument("--content", action="store_true", help="record prompts and completions")
    parser.add_argument("question", nargs="?", default="What is 12 * 13?")
    args = parser.parse_args()

    provider = configure_tracing("jaeger", endpoint=args.endpoint)
    try:
        async with model_endpoint(args.base_url, args.model) as (base_url, model):
            client = OpenAICompatClient(base_url, model)
            graph = build_pacore_graph(
                client,
                config=PaCoReConfig(rounds=[4, 2], sampling=SamplingParams(max_tokens=128)),
                tracing=TraceOptions(tracer_provider=provider, capture_content=args.content),
            )
            result = await ainvoke_pacore(graph, args.question)
            await client.aclose()
    finally:
        provider.shutdown()  # flush the batched spans before exiting
    print(result.answer.strip())
    run_id = result.extra["run_id"]
    print(f"run {run_id}: in Jaeger, search tags gen_ai.conversation.id={run_id}")


if __name__ == "__main__":
    asyncio.run(main())
