"""The core workload: 200 problems at the ``high`` preset (32, 4, 1 = 7,400 samples).

Every variant runs in its own process (so peak RSS is its own) against the
scripted OpenAI-compatible server, started once per latency in another
process. Variants:

- ``floor``: a bare asyncio + pooled aiohttp loop doing the same rounds, one
  request per sample (the shape of the public pipeline, minus its per-call
  connections). The baseline.
- ``floor-n``: the same loop sending each round's K samples as one ``n=K``
  request.
- ``graph``: ``pacore_graph`` as users run it (LangGraph ``Send`` per
  explorer, n-batching on, the direct aiohttp client).
- ``graph-nobatch``: the graph with one request per explorer.
- ``graph-langchain``: the graph with LangChain's ``ChatOpenAI`` (aiohttp
  transport) as the client.
- ``graph-notrace``: the graph built with ``tracing=False`` (no span calls at
  all); ``graph`` itself runs with the OpenTelemetry API and no SDK provider,
  which is what "tracing off" means for a user.
- ``graph-inmemory``: the graph with an SDK provider exporting every span to
  an in-memory exporter (batch processor), i.e. tracing on.
- ``graph-ckpt-exit`` / ``-async`` / ``-sync``: the graph checkpointing every
  problem on its own thread to a SQLite file (the saver ``pacore run
  --input`` uses by default), with LangGraph's ``durability`` mode.
- ``graph-subgraph``: the plain chat explorer wrapped in a one-node compiled
  explorer subgraph (``GraphExplorer``): the per-``Send`` cost of a subgraph.

The model-call limit is 1,024 samples in flight for every variant. Prints a
table of medians over ``--repeats`` runs, alternating variants, and each
variant's ratio to ``floor`` measured in the same sitting.

    python benchmarks/bench_core.py                 # 0.5 s and 0 s latency
    python benchmarks/bench_core.py --latency 0.5 --repeats 3 --variants floor,graph
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import aiohttp
from workload import floor_prompt, problems

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "pacore_graph" / "testing" / "scripted_server.py"
SCHEDULE = (32, 4, 1)
CONCURRENCY = 1024
VARIANTS = (
    "floor",
    "floor-n",
    "graph",
    "graph-nobatch",
    "graph-langchain",
    "graph-notrace",
    "graph-inmemory",
    "graph-ckpt-exit",
    "graph-ckpt-async",
    "graph-ckpt-sync",
    "graph-subgraph",
)


# --------------------------------------------------------------------------- floor


async def floor(base_url: str, count: int, batched: bool) -> int:
    """The minimal loop: same rounds, same prompt rendering and compaction, no framework."""
    import jinja2

    from pacore_graph.control.limits import SequenceLimiter
    from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE

    template = jinja2.Template(SYNTHESIS_TEMPLATE)
    # Units are samples: a batched request holds K of them (a weighted, FIFO
    # semaphore; K plain acquires would deadlock between half-served requests).
    limiter = SequenceLimiter(CONCURRENCY)
    url = f"{base_url}/chat/completions"
    connector = aiohttp.TCPConnector(limit=0)
    calls = 0

    async with aiohttp.ClientSession(connector=connector) as session:

        async def post(messages: list[dict[str, Any]], n: int) -> list[str]:
            nonlocal calls
            async with limiter.hold(n):
                body = {"model": "scripted", "messages": messages, "temperature": 1.0, "top_p": 1.0}
                if n > 1:
                    body["n"] = n
                async with session.post(url, json=body) as resp:
                    data = await resp.json()
            calls += 1
            return [c["message"]["content"] or "" for c in data["choices"]]

        async def solve(question: str) -> str:
            messages: list[str] = []
            for r, k in enumerate(SCHEDULE):
                prompt = floor_prompt(template, question, messages, r)
                if batched:
                    texts = await post(prompt, k)
                else:
                    groups = await asyncio.gather(*(post(prompt, 1) for _ in range(k)))
                    texts = [g[0] for g in groups]
                messages = [t.rpartition("</think>")[2] for t in texts if t]
            return messages[0]

        await asyncio.gather(*(solve(q) for q in problems(count)))
    return calls


# --------------------------------------------------------------------------- graph


async def graph(
    base_url: str,
    count: int,
    batched: bool,
    langchain: bool,
    tracing: str = "api",
    durability: str | None = None,
    subgraph: bool = False,
) -> int:
    from pacore_graph import OpenAICompatClient, PaCoReConfig, build_pacore_graph
    from pacore_graph.llm.client import ChatClient
    from pacore_graph.otel.spans import TraceOptions

    config = PaCoReConfig.from_preset("high", max_concurrency=CONCURRENCY, batch_samples=batched)
    client: ChatClient
    if langchain:
        from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model

        client = LangChainChatClient(make_chat_model(base_url, "scripted"))
    else:
        client = OpenAICompatClient(base_url, "scripted")
    options = TraceOptions(enabled=tracing != "off")
    exporter = None
    if tracing == "inmemory":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))
        options = TraceOptions(tracer_provider=provider)
    explorer = None
    if subgraph:
        explorer = _subgraph_explorer(client, config)
    app = build_pacore_graph(client, config=config, tracing=options, explorer=explorer)
    if durability is None:
        results = await asyncio.gather(
            *(app.ainvoke({"messages": [{"role": "user", "content": q}]}) for q in problems(count))
        )
    else:
        import tempfile

        from pacore_graph.runs.checkpoint import open_checkpointer, with_checkpointer

        with tempfile.TemporaryDirectory() as tmp:
            async with open_checkpointer(None, Path(tmp) / "ck.sqlite") as saver:
                durable = with_checkpointer(app, saver)
                results = await asyncio.gather(
                    *(
                        durable.ainvoke(
                            {"messages": [{"role": "user", "content": q}]},
                            {"configurable": {"thread_id": f"p{i}"}},
                            durability=durability,
                        )
                        for i, q in enumerate(problems(count))
                    )
                )
    if exporter is not None:
        provider.shutdown()
        expected = count * (1 + 3 + 37 + 3)  # run, rounds, chats, compactions
        got = len(exporter.get_finished_spans())
        if got != expected:
            raise RuntimeError(f"in-memory exporter holds {got} spans, expected {expected}")
    if isinstance(client, OpenAICompatClient):
        await client.aclose()
    return sum(len(r["result"].trajectories) for r in results)


class _SubState(TypedDict, total=False):
    task: Any  # ExploreTask
    trajectory: Any  # Trajectory


def _subgraph_explorer(client: Any, config: Any) -> Any:
    """The plain chat explorer inside a one-node compiled subgraph (a GraphExplorer)."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import START, StateGraph

    from pacore_graph.control.limits import SequenceLimiter
    from pacore_graph.graph.explorer import ChatExplorer, GraphExplorer
    from pacore_graph.llm.batching import SampleBatcher

    chat = ChatExplorer(
        SampleBatcher(
            client,
            SequenceLimiter(config.max_concurrency),
            config.sampling,
            enabled=config.batch_samples,
        )
    )

    async def call(state: _SubState, config: RunnableConfig) -> dict[str, Any]:
        return {"trajectory": await chat.explore(state["task"], config)}

    sub = StateGraph(_SubState)
    sub.add_node("call", call)
    sub.add_edge(START, "call")
    return GraphExplorer(sub.compile(name="chat_subgraph"))


# --------------------------------------------------------------------------- driver


def run_variant(variant: str, base_url: str, count: int) -> dict[str, Any]:
    started = time.perf_counter()
    if variant == "floor":
        done = asyncio.run(floor(base_url, count, batched=False))
    elif variant == "floor-n":
        done = asyncio.run(floor(base_url, count, batched=True))
    else:
        done = asyncio.run(
            graph(
                base_url,
                count,
                batched=variant != "graph-nobatch",
                langchain=variant == "graph-langchain",
                tracing={"graph-notrace": "off", "graph-inmemory": "inmemory"}.get(variant, "api"),
                durability=variant.removeprefix("graph-ckpt-")
                if variant.startswith("graph-ckpt-")
                else None,
                subgraph=variant == "graph-subgraph",
            )
        )
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss_mb = usage.ru_maxrss / 1024
    # CPU seconds of the whole process (imports included): on a loaded machine
    # wall time swings with the neighbours, the CPU a variant burns much less.
    cpu = usage.ru_utime + usage.ru_stime
    return {"variant": variant, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_mb, "units": done}


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    # Here, not at the top: the floor's child processes run this script and
    # must not pay for importing pacore_graph.
    from pacore_graph.testing.loopback_server import spawn_server

    argv = [sys.executable, str(SERVER), "--port", "0", "--latency", str(latency)]
    return spawn_server([*argv, "--reasoning-mode", "reasoning"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument(
        "--latency",
        type=float,
        action="append",
        help="server latency in seconds (repeatable; default 0.5 and 0)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", type=Path, help="also write the raw runs here")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # child process: one variant, one JSON line
        print(json.dumps(run_variant(args.one, args.url, args.problems)))
        return
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    if "floor" not in variants:
        variants.insert(0, "floor")
    raw: list[dict[str, Any]] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for latency in args.latency or [0.5, 0.0]:
        server, url = start_server(latency)
        try:
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
            for rep in range(args.repeats):
                order = variants if rep % 2 == 0 else list(reversed(variants))
                for v in order:
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--one",
                            v,
                            "--url",
                            url,
                            "--problems",
                            str(args.problems),
                        ],
                        capture_output=True,
                        text=True,
                        env=env,
                        check=False,
                    )
                    if out.returncode != 0:
                        raise RuntimeError(f"{v} failed:\n{out.stderr[-2000:]}")
                    result = json.loads(out.stdout.strip().splitlines()[-1])
                    result["latency"] = latency
                    runs[v].append(result)
                    raw.append(result)
        finally:
            server.terminate()
            server.wait(timeout=10)
        base = statistics.median(r["wall_s"] for r in runs["floor"])
        print(
            f"\n{args.problems} problems x high (32,4,1) = {args.problems * 37} samples, "
            f"server latency {latency:g}s, {CONCURRENCY} in flight, median of {args.repeats}"
        )
        cpu_base = statistics.median(r["cpu_s"] for r in runs["floor"])
        print(
            f"{'variant':<17}{'wall s':>9}{'vs floor':>10}{'CPU s':>8}{'vs floor':>10}"
            f"{'peak RSS MB':>13}  runs"
        )
        for v in variants:
            walls = [r["wall_s"] for r in runs[v]]
            med = statistics.median(walls)
            cpu = statistics.median(r["cpu_s"] for r in runs[v])
            rss = statistics.median(r["peak_rss_mb"] for r in runs[v])
            print(
                f"{v:<17}{med:>9.2f}{med / base:>10.2f}{cpu:>8.2f}{cpu / cpu_base:>10.2f}"
                f"{rss:>13.0f}  " + " ".join(f"{w:.2f}" for w in walls)
            )
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
