"""What the embedded server's HTTP path costs per request, against its engine alone.

Issue 31 moved everything between a request's bytes and the engine (JSON,
validation, chat template, length bounds, tokenizer) into a worker thread
and tokenizes in pieces; this measures what that costs on the normal path.

First the preparation alone, in this process, alternating: ``inline`` is
what the server did before (decode, validate, render, tokenize the whole
prompt, on the calling thread); ``now`` is ``EmbeddedApp._prepare`` through
``asyncio.to_thread``. CPU time of this process per request (steadier than
wall time on a loaded machine) and wall time, for a short prompt and a
~1,500-token one. Then, in the same run, alternating:

- ``engine``: this process's own :class:`BatchEngine` (same model, same
  threads), the chat prompt rendered and tokenized here, one request of
  ``max_tokens`` submitted and waited for;
- ``http``: the same request as ``POST /v1/chat/completions`` to an
  :class:`EmbeddedServer` child (one pooled aiohttp session).

Two workloads: ``--requests`` sequential requests of ``max_tokens=1`` (the
per-request overhead: prefill plus the path around it), and ``--concurrent``
requests at once of ``--tokens`` tokens (tokens/s of all of them together).
Prints medians over ``--repeats`` and the ratio http / engine.

    python benchmarks/bench_embedded_http.py
    python benchmarks/bench_embedded_http.py --requests 40 --concurrent 8 --tokens 64 --repeats 5
    python benchmarks/bench_embedded_http.py --prepare-only --prepares 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from pacore_graph.embedded import EmbeddedServer
from pacore_graph.embedded.app import EmbeddedApp
from pacore_graph.embedded.chat_template import ChatTemplate
from pacore_graph.embedded.engine import BatchEngine, ChoiceEvent, EngineFailure, SamplingSpec
from pacore_graph.embedded.prompt import PromptTokenizer
from pacore_graph.embedded.protocol import parse_request
from pacore_graph.embedded.token_logprobs import TokenPieces
from pacore_graph.embedded.weights import find_default_model

QUESTION = "Write a short story about a lighthouse keeper and a storm."


def _bodies() -> dict[str, bytes]:
    """A short chat request, and one of ~1,500 prompt tokens over a few turns."""
    short = [{"role": "user", "content": QUESTION}]
    paragraph = "The keeper climbed the stairs again, counting each step in the dark. " * 22
    long = [{"role": "user" if i % 2 == 0 else "assistant", "content": paragraph} for i in range(6)]
    return {
        name: json.dumps({"messages": messages, "max_tokens": 16}).encode()
        for name, messages in (("short", short), ("long", long))
    }


def _prepare_inline(engine: BatchEngine, template: ChatTemplate, raw: bytes) -> int:
    """What the server did on its event loop before issue 31."""
    request = parse_request(json.loads(raw), max_n=engine.max_sequences)
    text = template.render([m.for_template() for m in request.messages])
    return len(engine.tokenize(text))


async def _prepare_round(
    engine: BatchEngine, app: EmbeddedApp, template: ChatTemplate, raw: bytes, count: int
) -> dict[str, tuple[float, float]]:
    """(CPU s, wall s) per request of each way, ``count`` requests each."""
    out: dict[str, tuple[float, float]] = {}
    for way in ("inline", "now"):
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(count):
            if way == "inline":
                tokens = _prepare_inline(engine, template, raw)
            else:
                _, prompt, _ = await asyncio.to_thread(app._prepare, raw)
                tokens = len(prompt)
        out[way] = (
            (time.process_time() - cpu) / count,
            (time.perf_counter() - wall) / count,
        )
        assert tokens > 0
    return out


def _prepare_report(engine: BatchEngine, template: ChatTemplate, args: argparse.Namespace) -> None:
    app = EmbeddedApp(
        engine, PromptTokenizer(template, engine, engine.n_ctx), "m", TokenPieces(engine.vocab)
    )
    print(f"{'prompt':>7} {'way':>7} {'CPU us/request':>15} {'wall us/request':>16}")
    for name, raw in _bodies().items():
        tokens = _prepare_inline(engine, template, raw)
        rounds = [
            asyncio.run(_prepare_round(engine, app, template, raw, args.prepares))
            for _ in range(args.repeats)
        ]
        for way in ("inline", "now"):
            cpu = statistics.median(r[way][0] for r in rounds) * 1e6
            wall = statistics.median(r[way][1] for r in rounds) * 1e6
            print(f"{name:>7} {way:>7} {cpu:>15.0f} {wall:>16.0f}")
        ratio = statistics.median(r["now"][0] / r["inline"][0] for r in rounds)
        print(f"{name:>7} {'ratio':>7} {ratio:>15.2f}   ({tokens} prompt tokens)")


def _engine_request(engine: BatchEngine, template: ChatTemplate, tokens: int, seed: int) -> int:
    """Render, tokenize and run one request on the engine; its completion tokens."""
    prompt = engine.tokenize(template.render([{"role": "user", "content": QUESTION}]))
    done = threading.Event()
    made: list[int] = []

    def sink(item: Sequence[ChoiceEvent] | EngineFailure) -> None:
        if isinstance(item, EngineFailure):
            raise RuntimeError(item.message)
        for event in item:
            if event.finish_reason is not None:
                made.append(event.completion_tokens)
                done.set()

    spec = SamplingSpec(max_new_tokens=tokens, seed=seed, temperature=0.0)
    engine.submit(prompt, 1, spec, sink)
    done.wait()
    return made[0]


async def _http_request(session: aiohttp.ClientSession, url: str, tokens: int, seed: int) -> int:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": tokens,
        "seed": seed,
        "temperature": 0.0,
    }
    async with session.post(url, json=body) as resp:
        answer = await resp.json()
    if resp.status != 200:
        raise RuntimeError(str(answer))
    return int(answer["usage"]["completion_tokens"])


def _engine_round(
    engine: BatchEngine, template: ChatTemplate, args: argparse.Namespace
) -> tuple[float, float]:
    started = time.perf_counter()
    for i in range(args.requests):
        _engine_request(engine, template, 1, i)
    per_request = (time.perf_counter() - started) / args.requests
    made: list[int] = []
    threads = [
        threading.Thread(
            target=lambda i=i: made.append(_engine_request(engine, template, args.tokens, i))
        )
        for i in range(args.concurrent)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per_request, sum(made) / (time.perf_counter() - started)


async def _http_round(url: str, args: argparse.Namespace) -> tuple[float, float]:
    async with aiohttp.ClientSession() as session:
        await _http_request(session, url, 1, 0)  # the connection is open before timing
        started = time.perf_counter()
        for i in range(args.requests):
            await _http_request(session, url, 1, i)
        per_request = (time.perf_counter() - started) / args.requests
        started = time.perf_counter()
        made = await asyncio.gather(
            *(_http_request(session, url, args.tokens, i) for i in range(args.concurrent))
        )
        return per_request, sum(made) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="sequential 1-token requests")
    parser.add_argument("--concurrent", type=int, default=8, help="requests at once")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per concurrent request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prepares", type=int, default=500, help="requests per preparation round")
    parser.add_argument("--prepare-only", action="store_true", help="skip the HTTP comparison")
    args = parser.parse_args()
    threads = max(1, len(os.sched_getaffinity(0)) - 1)  # the server's default
    print(f"load average {os.getloadavg()[0]:.1f}, {threads} llama.cpp thread(s)")
    engine = BatchEngine(
        find_default_model(),
        n_ctx=2048,
        max_sequences=args.concurrent,
        kv_tokens=max(2048, args.concurrent * (args.tokens + 128)),
        n_threads=threads,
    )
    template = ChatTemplate(engine.chat_template)
    _prepare_report(engine, template, args)
    if args.prepare_only:
        engine.close()
        print(f"load average {os.getloadavg()[0]:.1f}")
        return
    rows: dict[str, list[tuple[float, float]]] = {"engine": [], "http": []}
    with EmbeddedServer(max_sequences=args.concurrent, n_threads=threads) as server:
        url = server.base_url + "/chat/completions"
        for _ in range(args.repeats):
            rows["engine"].append(_engine_round(engine, template, args))
            rows["http"].append(asyncio.run(_http_round(url, args)))
    engine.close()
    latency = {k: statistics.median(r[0] for r in v) * 1000 for k, v in rows.items()}
    rate = {k: statistics.median(r[1] for r in v) for k, v in rows.items()}
    print(f"{'path':>7} {'1-token request ms':>19} {f'{args.concurrent} at once tok/s':>18}")
    for path in ("engine", "http"):
        print(f"{path:>7} {latency[path]:>19.1f} {rate[path]:>18.1f}")
    ratio_latency = latency["http"] / latency["engine"]
    ratio_rate = rate["http"] / rate["engine"]
    print(f"{'ratio':>7} {ratio_latency:>19.2f} {ratio_rate:>18.2f}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
