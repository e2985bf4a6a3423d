"""Tokens online DeepConf saves against a majority vote over the same traces, at their accuracy.

Runs ``majority:N``, offline ``deepconf:N`` and ``deepconf-online:N`` (keep
0.9, the public code's default, and 0.1, the paper's DeepConf-low) on the
throughput server (vLLM's timing: a shared decode throughput, lognormal
lengths), streaming as it decodes so a stopped trace is cancelled upstream.
A *noisy oracle* responder stands in for the model, by input only:

- trace j of problem q is right with probability p_q (p_q drawn per problem
  in [0.25, 0.85]), else it gives one of three wrong answers;
- a right trace's tokens have confidence about 2.1 (per-token noise); with
  probability ``--false-alarm`` it has one window-long dip to about 1.0;
- a wrong trace falters with probability ``--detectable``: from a point 20-50%
  into it, its confidence drops to about 1.0; the others stay confident.

The same N traces (answer, length, confidences) are served to every method:
trace j is the same whether it is sample j of majority's ``n=N`` request, of
the warm-up's, or the j-th online request, so accuracy differs only by the
vote and tokens only by the stops. The window is scaled to the traces
(``--window``, default 64 tokens for a median of 400; the paper's 2,048 is
for traces of 10k+ tokens). The server counts the tokens it decoded
(``tokens_generated``), the records count effective TTC.

    python benchmarks/bench_deepconf.py
    python benchmarks/bench_deepconf.py --problems 100 --n 32
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import time
from dataclasses import dataclass
from typing import Any

from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graphs.deepconf import (
    build_deepconf_graph,
    build_deepconf_online_graph,
    default_warmup,
)
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.testing import LengthModel, ScriptedReply, ScriptedRequest, ThroughputServer
from pacore_graph.values.aggregation import extract_final_answer

BASE_SEED = 7000
ROUND_STRIDE = 1000


def rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def question_of(prompt: str) -> str:
    """The question in a request's messages (the server passes them as sorted JSON)."""
    messages = json.loads(prompt)
    return str(messages[-1]["content"])


@dataclass(frozen=True, slots=True)
class Oracle:
    """Which trace a request is, and what that trace says, answers and costs."""

    warmup: int
    lengths: LengthModel
    false_alarm: float
    detectable: float
    window: int

    def trace(self, seed: int | None, sample_index: int) -> int:
        """The trace number: majority's and the warm-up's sample j, or online request j."""
        seed = seed or BASE_SEED
        if seed < BASE_SEED + ROUND_STRIDE:
            return sample_index
        return self.warmup + (seed - BASE_SEED - ROUND_STRIDE) + sample_index

    def length(self, question: str, trace: int) -> int:
        return self.lengths.length(None, trace, question)

    def reply(self, question: str, trace: int) -> ScriptedReply:
        truth = int(question.split("#")[1])
        p = 0.25 + 0.6 * rng("p", question).random()
        draw = rng("trace", question, trace)
        right = draw.random() < p
        answer = truth if right else truth + draw.choice([1, 2, 3])
        n = self.length(question, trace)
        noise = [draw.uniform(-0.3, 0.3) for _ in range(n)]
        conf = [2.1 + e for e in noise]
        if right and draw.random() < self.false_alarm:
            start = draw.randrange(max(1, n - self.window))
            for i in range(start, min(n, start + self.window)):
                conf[i] = 1.0 + noise[i]
        if not right and draw.random() < self.detectable:
            start = int(n * draw.uniform(0.2, 0.5))
            for i in range(start, n):
                conf[i] = 1.0 + noise[i]
        return ScriptedReply(content=f"So \\boxed{{{answer}}}", confidence=tuple(conf))


class TraceLengths(LengthModel):
    """The server's lengths by trace number, so every method sees the same traces."""

    oracle: Oracle | None = None

    def length(self, seed: int | None, sample_index: int, prompt: str) -> int:
        assert self.oracle is not None
        trace = self.oracle.trace(seed, sample_index)
        return self.oracle.length(question_of(prompt), trace)


async def run_method(
    name: str, graph: Any, srv: ThroughputServer, problems: list[str], concurrency: int
) -> dict[str, Any]:
    srv_stats_before = srv.stats()["tokens_generated"]
    gate = asyncio.Semaphore(concurrency)
    started = time.perf_counter()

    async def one(q: str) -> tuple[bool, int, int]:
        async with gate:
            result = await ainvoke_pacore(graph, q)
        right = extract_final_answer(result.answer) == q.split("#")[1]
        dropped = sum(t.finish_reason == "dropped" for t in result.trajectories)
        return right, result.effective_ttc, dropped

    outcomes = await asyncio.gather(*(one(q) for q in problems))
    wall = time.perf_counter() - started
    for _ in range(200):
        if srv.stats()["in_flight"] == 0:
            break
        await asyncio.sleep(0.02)
    return {
        "method": name,
        "accuracy": sum(o[0] for o in outcomes) / len(problems),
        "effective_ttc": sum(o[1] for o in outcomes),
        "server_tokens": srv.stats()["tokens_generated"] - srv_stats_before,
        "dropped": sum(o[2] for o in outcomes),
        "wall_s": wall,
    }


async def main(args: argparse.Namespace) -> None:
    warmup = args.warmup or default_warmup(args.n)
    base = LengthModel(median=args.median, sigma=args.sigma)
    oracle = Oracle(warmup, base, args.false_alarm, args.detectable, args.window)
    lengths = TraceLengths(median=args.median, sigma=args.sigma)
    object.__setattr__(lengths, "oracle", oracle)

    def respond(req: ScriptedRequest) -> ScriptedReply:
        return oracle.reply(req.last_user, oracle.trace(req.seed, req.sample_index))

    problems = [f"Problem #{100 + i}" for i in range(args.problems)]
    config = PaCoReConfig(
        sampling=SamplingParams(seed=BASE_SEED, timeout=120.0),
        retry=ModelRetryPolicy(max_attempts=1),
        max_concurrency=4096,
    )
    async with ThroughputServer(
        respond,
        throughput=args.throughput,
        per_sequence_cap=args.per_sequence_cap,
        lengths=lengths,
        stream_chunk_tokens=args.chunk,
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", api_key="bench")
        k = args.top_logprobs
        methods = [
            (f"majority:{args.n}", build_majority_graph(client, args.n, config=config)),
            (
                f"deepconf:{args.n} (share 0.1)",
                build_deepconf_graph(
                    client, args.n, config=config, window=args.window, top_logprobs=k
                ),
            ),
        ]
        for keep in (0.9, 0.1):
            graph = build_deepconf_online_graph(
                client,
                args.n,
                config=config,
                warmup=warmup,
                keep=keep,
                window=args.window,
                top_logprobs=k,
            )
            methods.append((f"deepconf-online:{args.n} (keep {keep})", graph))
        rows = [await run_method(n, g, srv, problems, args.concurrency) for n, g in methods]
        await client.aclose()
    base_tokens = rows[0]["server_tokens"]
    print(
        f"{args.problems} problems, N={args.n}, warm-up {warmup}, window {args.window}, "
        f"median length {args.median}, sigma {args.sigma}, top_logprobs {args.top_logprobs}"
    )
    print("| method | accuracy | effective TTC | server tokens | vs majority | dropped | wall |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        change = r["server_tokens"] / base_tokens - 1
        print(
            f"| {r['method']} | {r['accuracy']:.2f} | {r['effective_ttc']:,} | "
            f"{r['server_tokens']:,} | {change:+.1%} | {r['dropped']} | {r['wall_s']:.1f} s |"
        )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", type=int, default=60)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--warmup", type=int, default=None, help="default: min(16, max(2, N/4))")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--median", type=float, default=400.0)
    p.add_argument("--sigma", type=float, default=0.6)
    p.add_argument("--false-alarm", type=float, default=0.15)
    p.add_argument("--detectable", type=float, default=0.75)
    p.add_argument("--top-logprobs", type=int, default=2)
    p.add_argument("--throughput", type=float, default=400_000.0)
    p.add_argument("--per-sequence-cap", type=float, default=20_000.0)
    p.add_argument("--chunk", type=int, default=16, help="tokens per streamed event")
    p.add_argument("--concurrency", type=int, default=8, help="problems in flight")
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
