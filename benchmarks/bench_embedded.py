"""Tokens per second of the embedded engine: K sequences decoded together vs one at a time.

A PaCoRe round is K samples of one prompt. The embedded server decodes them
in one batch (:class:`pacore_graph.embedded.engine.BatchEngine`); the server
it replaced decoded one request at a time. This measures both on the same
engine in the same run, alternating: ``batched`` submits one request with
``n=K``; ``one-at-a-time`` submits K requests of ``n=1`` and waits for each
before the next. Each sample has up to ``--tokens`` tokens (one that ends
early counts what it made); tokens/s is all tokens over the wall time.

    python benchmarks/bench_embedded.py                   # K = 1, 4, 8; 200 tokens; 3 repeats
    python benchmarks/bench_embedded.py --ks 1,4,8,16 --tokens 100 --repeats 5

Prints, per K, the median tokens/s of each mode and their ratio, the load
time and the peak RSS of this process (model and KV cache included).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import threading
import time
from collections.abc import Sequence

from pacore_graph.embedded.engine import BatchEngine, ChoiceEvent, EngineFailure, SamplingSpec
from pacore_graph.embedded.weights import find_default_model

PROMPT = (
    "<|im_start|>user\nWrite a long story about a lighthouse keeper and a storm.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def _run(engine: BatchEngine, prompt: list[int], n: int, tokens: int, seed: int) -> int:
    """Submit one request of ``n`` samples; the tokens generated once all finished."""
    done = threading.Event()
    state = {"finished": 0, "tokens": 0}
    failure: list[str] = []

    def sink(item: Sequence[ChoiceEvent] | EngineFailure) -> None:
        if isinstance(item, EngineFailure):
            failure.append(item.message)
            done.set()
            return
        for event in item:
            if event.finish_reason is not None:
                state["finished"] += 1
                state["tokens"] += event.completion_tokens
        if state["finished"] == n:
            done.set()

    engine.submit(prompt, n, SamplingSpec(max_new_tokens=tokens, seed=seed), sink)
    done.wait()
    if failure:
        raise RuntimeError(failure[0])
    return state["tokens"]


def measure(engine: BatchEngine, k: int, tokens: int, seed: int) -> dict[str, float]:
    """tokens/s of K samples decoded together, then of the same K samples one at a time."""
    prompt = engine.tokenize(PROMPT)
    started = time.perf_counter()
    batched = _run(engine, prompt, k, tokens, seed)
    batched_s = time.perf_counter() - started
    started = time.perf_counter()
    single = sum(_run(engine, prompt, 1, tokens, seed + i) for i in range(k))
    single_s = time.perf_counter() - started
    return {"batched": batched / batched_s, "one_at_a_time": single / single_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ks", default="1,4,8", help="comma-separated K values")
    parser.add_argument("--tokens", type=int, default=200, help="tokens per sample")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=max(1, len(os.sched_getaffinity(0)) - 1),
        help="llama.cpp threads (default: the embedded server's, one per core but one)",
    )
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]

    started = time.perf_counter()
    engine = BatchEngine(
        find_default_model(),
        n_ctx=2048,
        max_sequences=max(ks),
        kv_tokens=max(2048, max(ks) * (args.tokens + 64)),
        n_threads=args.threads,
    )
    load_s = time.perf_counter() - started
    print(f"load {load_s:.2f} s, {args.threads} threads, load average {os.getloadavg()[0]:.1f}")
    print(f"{'K':>3} {'batched tok/s':>14} {'one-at-a-time tok/s':>20} {'ratio':>6}")
    for k in ks:
        runs = [measure(engine, k, args.tokens, seed=1000 * r) for r in range(args.repeats)]
        batched = statistics.median(r["batched"] for r in runs)
        single = statistics.median(r["one_at_a_time"] for r in runs)
        print(f"{k:>3} {batched:>14.1f} {single:>20.1f} {batched / single:>6.2f}")
    engine.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MB, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
