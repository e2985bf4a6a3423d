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
    python benchmarks/bench_embedded.py --ks 4 --top-logprobs 20   # the cost of logprobs
    python benchmarks/bench_embedded.py --ks 4 --top-logprobs 20 --pure-python

Prints, per K, the median tokens/s of each mode and their ratio, the load
time and the peak RSS of this process (model and KV cache included). With
``--top-logprobs K`` a third mode runs in the same alternation: the batched
request asking for every token's log-probability and K alternatives (what
DeepConf asks), and its tokens/s relative to the batched one without;
``--pure-python`` computes them without numpy, as where numpy is not installed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import threading
import time
from collections.abc import Sequence

from pacore_graph.embedded import token_logprobs
from pacore_graph.embedded.engine import BatchEngine, ChoiceEvent, EngineFailure, SamplingSpec
from pacore_graph.embedded.weights import find_default_model

PROMPT = (
    "<|im_start|>user\nWrite a long story about a lighthouse keeper and a storm.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def _run(
    engine: BatchEngine,
    prompt: list[int],
    n: int,
    tokens: int,
    seed: int,
    top_logprobs: int | None = None,
) -> int:
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

    spec = SamplingSpec(max_new_tokens=tokens, seed=seed, top_logprobs=top_logprobs)
    engine.submit(prompt, n, spec, sink)
    done.wait()
    if failure:
        raise RuntimeError(failure[0])
    return state["tokens"]


def measure(
    engine: BatchEngine, k: int, tokens: int, seed: int, top_logprobs: int | None = None
) -> dict[str, float]:
    """tokens/s of K samples decoded together, then of the same K samples one at a time.

    With ``top_logprobs``, then of the same K samples together again, asking
    for log-probabilities (the same seeds: the same tokens, so the same work).
    """
    prompt = engine.tokenize(PROMPT)
    started = time.perf_counter()
    batched = _run(engine, prompt, k, tokens, seed)
    batched_s = time.perf_counter() - started
    started = time.perf_counter()
    single = sum(_run(engine, prompt, 1, tokens, seed + i) for i in range(k))
    single_s = time.perf_counter() - started
    rates = {"batched": batched / batched_s, "one_at_a_time": single / single_s}
    if top_logprobs is not None:
        started = time.perf_counter()
        asked = _run(engine, prompt, k, tokens, seed, top_logprobs)
        rates["logprobs"] = asked / (time.perf_counter() - started)
    return rates


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
    parser.add_argument(
        "--top-logprobs",
        type=int,
        default=None,
        metavar="K",
        help="also measure the batched mode asking for logprobs with K alternatives (0-20)",
    )
    parser.add_argument(
        "--pure-python",
        action="store_true",
        help="compute logprobs without numpy (as where it is not installed)",
    )
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    if args.pure_python:
        token_logprobs._np = None  # type: ignore[assignment]  # its fallback without numpy
    k_top = args.top_logprobs

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
    header = f"{'K':>3} {'batched tok/s':>14} {'one-at-a-time tok/s':>20} {'ratio':>6}"
    if k_top is not None:
        numpy = "pure Python" if token_logprobs._np is None else "numpy"
        header += f" {f'logprobs k={k_top} tok/s ({numpy})':>32} {'vs batched':>10}"
    print(header)
    for k in ks:
        runs = [
            measure(engine, k, args.tokens, seed=1000 * r, top_logprobs=k_top)
            for r in range(args.repeats)
        ]
        batched = statistics.median(r["batched"] for r in runs)
        single = statistics.median(r["one_at_a_time"] for r in runs)
        line = f"{k:>3} {batched:>14.1f} {single:>20.1f} {batched / single:>6.2f}"
        if k_top is not None:
            asked = statistics.median(r["logprobs"] for r in runs)
            line += f" {asked:>32.1f} {asked / batched:>10.2f}"
        print(line)
    engine.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MB, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
