"""Accuracy, compute and wall time under straggler control, early stop and a token budget.

Runs the PaCoRe graph (the same one ``pacore eval`` builds) on arithmetic
problems against the scripted server with a *noisy oracle* responder, so
accuracy means something without a model:

- a first-round explorer is right with probability ``--p-correct``, else it
  picks one of three wrong answers; its length (completion tokens) and its
  latency are heavy-tailed and independent of whether it is right;
- a synthesis explorer reads the references in its prompt and answers their
  majority with probability 0.85, else a random reference's answer.

Every draw is a hash of the request (question, seed, sample index), never of
call order. Prints, per setting: accuracy, mean effective TTC (completion
tokens per problem), mean widths run, wall time (the slowest problem: one
heavy-tailed draw can move it), the mean time a problem took (steadier) and
the HTTP requests sent, all from one sitting.

The server decodes the ``n`` choices of a request concurrently (each choice
sleeps its own latency), as a real one does; ``--sequential-choices`` brings
back the scripted server's default of one choice after the other, under
which an ``n=K`` request takes the sum of K latencies. Straggler control
keeps a round one ``n=K`` request, streamed, so each sample counts as it
finishes and the dropped ones are cancelled by disconnecting.

    python benchmarks/bench_round_control.py
    python benchmarks/bench_round_control.py --problems 100 --rounds 32,4
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import os
import random
import re
import statistics
import time
from collections import Counter
from typing import Any

from pacore_graph import OpenAICompatClient, PaCoReConfig, build_pacore_graph
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.aggregation import extract_final_answer

BOXED = re.compile(r"\\boxed\{(-?\d+)\}")


def rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def truth(question: str) -> int:
    a, b = (int(x) for x in re.findall(r"\d+", question)[:2])
    return a + b


def make_responder(p_correct: float, latency_median: float) -> Any:
    async def respond(req: ScriptedRequest) -> ScriptedReply:
        r = rng(req.last_user, req.seed, req.sample_index)
        # Latency and length: lognormal, independent of correctness.
        await asyncio.sleep(latency_median * math.exp(0.8 * r.gauss(0, 1)))
        tokens = max(5, round(60 * math.exp(r.gauss(0, 1))))
        refs = BOXED.findall(req.last_user)
        if not refs:  # first round: the question itself
            right = truth(req.last_user)
            wrong = right + r.choice([-10, -1, 1])
            answer = right if r.random() < p_correct else wrong
        elif r.random() < 0.85:
            answer = int(Counter(refs).most_common(1)[0][0])
        else:
            answer = int(r.choice(refs))
        return ScriptedReply(
            content=f"So the result is \\boxed{{{answer}}}", completion_tokens=tokens
        )

    return respond


def problems(count: int) -> list[str]:
    r = random.Random(7)
    return [f"What is {r.randint(10, 99)} + {r.randint(10, 99)}?" for _ in range(count)]


async def evaluate(
    url: str, questions: list[str], rounds: list[int], **flags: Any
) -> dict[str, Any]:
    client = OpenAICompatClient(url, "scripted", retry=ModelRetryPolicy(max_attempts=1))
    config = PaCoReConfig(
        rounds=rounds, max_concurrency=4096, sampling=SamplingParams(seed=0), **flags
    )
    graph = build_pacore_graph(client, config=config, tracing=False)
    started = time.perf_counter()
    finished: list[float] = []

    async def solve(question: str) -> Any:
        out = await graph.ainvoke({"messages": [{"role": "user", "content": question}]})
        finished.append(time.perf_counter() - started)
        return out

    outs = await asyncio.gather(*(solve(q) for q in questions))
    wall = time.perf_counter() - started
    await client.aclose()
    results = [o["result"] for o in outs]
    right = sum(
        extract_final_answer(r.answer) == str(truth(q))
        for r, q in zip(results, questions, strict=True)
    )
    widths = Counter(tuple(len(rnd) for rnd in r.rounds) for r in results)
    return {
        "accuracy": right / len(questions),
        "ttc": statistics.mean(r.effective_ttc for r in results),
        "widths": ", ".join(f"{'+'.join(map(str, w))} x{c}" for w, c in widths.most_common(3)),
        "wall": wall,
        "per_problem": statistics.mean(finished),
        "dropped": sum(
            len(n.get("dropped", [])) for r in results for n in r.extra.get("round_control", [])
        ),
    }


async def main_async(args: argparse.Namespace) -> None:
    rounds = [int(x) for x in args.rounds.split(",")]
    questions = problems(args.problems)
    full = sum(rounds) + 1
    settings: list[tuple[str, dict[str, Any]]] = [
        ("baseline", {}),
        ("quorum 0.75", {"round_quorum": 0.75}),
        ("quorum 0.5", {"round_quorum": 0.5}),
        (f"deadline {args.latency * 3:g}s", {"round_deadline": args.latency * 3}),
        ("early stop 0.9", {"early_stop_consensus": 0.9}),
        ("early stop 0.7", {"early_stop_consensus": 0.7}),
    ]
    for share in (0.6, 0.4, 0.25):
        budget = int(full * 99 * share)  # 99: the mean of the lognormal lengths
        settings.append((f"token budget {budget}", {"token_budget": budget}))
    responder = make_responder(args.p_correct, args.latency)
    server = ScriptedServer(
        responder, log_requests=False, concurrent_choices=not args.sequential_choices
    )
    async with server as srv:
        print(
            f"{args.problems} problems, rounds {rounds}+1, p(correct) {args.p_correct}, "
            f"median latency {args.latency:g}s; load {os.getloadavg()[0]:.1f}"
        )
        print(
            f"{'setting':<20}{'accuracy':>9}{'mean TTC':>10}{'wall s':>8}{'mean s':>8}"
            f"{'dropped':>9}{'requests':>10}  widths run"
        )
        for name, flags in settings:
            before = srv.request_count
            row = await evaluate(srv.base_url, questions, rounds, **flags)
            print(
                f"{name:<20}{row['accuracy']:>9.2f}{row['ttc']:>10.0f}{row['wall']:>8.2f}"
                f"{row['per_problem']:>8.2f}{row['dropped']:>9}"
                f"{srv.request_count - before:>10}  {row['widths']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--rounds", default="16,4")
    parser.add_argument("--p-correct", type=float, default=0.4)
    parser.add_argument("--latency", type=float, default=0.2, help="median seconds per call")
    parser.add_argument(
        "--sequential-choices",
        action="store_true",
        help="the server answers the n choices of a request one after the other",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
