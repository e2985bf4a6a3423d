"""Reproduce the paper's Table 1 in one command: four benchmarks, the paper's methods, table1.md.

A user's story: "I serve PaCoRe-8B with vLLM; does PaCoRe beat single calls
and majority voting at matched compute on the paper's benchmarks, as the
paper says?" This runs HMMT 2025, LiveCodeBench 2408-2505, HLE (text) and
MultiChallenge with ``single``, ``pacore:low|medium|high`` and majority
voting matched to pacore:low's measured effective TTC, grades each by its
benchmark's rule (math answers, code run against its tests in the sandbox,
an LLM judge for HLE and MultiChallenge), and writes ``OUT/table1.md`` with
the paper's figures beside ours (docs/reproduce.md has the vLLM command,
the expected wall time and how to resume):

    python examples/reproduce_table1.py --base-url http://localhost:8000/v1 --model pacore-8b \\
        --judge-base-url http://localhost:8001/v1 --judge-model judge --out table1-out

Run it again with the same ``--out`` to resume: finished runs and judged
verdicts are kept. ``--benchmarks hmmt25,livecodebench`` keeps a subset
(judged benchmarks need the judge flags), ``--limit 5`` the first problems
of each, and ``--dataset KEY=SPEC`` reads a local copy in the hub's format
(``--dataset hmmt25=hmmt25:/data/hmmt_feb_2025.parquet``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from pacore_graph import OpenAICompatClient, PaCoReConfig, PaCoReError, SamplingParams
from pacore_graph.eval.code_grader import CodeGrader
from pacore_graph.eval.judge import JudgeGrader
from pacore_graph.eval.table1 import BASE_METHODS, TABLE1, run_table1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True, help="the model server (vLLM), .../v1")
    parser.add_argument("--model", required=True, help="the served model name, e.g. pacore-8b")
    parser.add_argument("--out", type=Path, required=True, help="output folder (resumable)")
    parser.add_argument("--judge-base-url", help="the judge's OpenAI-compatible server")
    parser.add_argument("--judge-model", help="the judge's model name")
    parser.add_argument(
        "--benchmarks",
        default=",".join(b.key for b in TABLE1),
        help="comma-separated subset (default: all four)",
    )
    parser.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="KEY=SPEC",
        help="read a benchmark from SPEC instead of the hub (repeatable)",
    )
    parser.add_argument("--samples", type=int, default=1, help="runs per problem (default 1)")
    parser.add_argument("--limit", type=int, help="first N problems of each (default: all)")
    parser.add_argument("--match-to", default="pacore:low", help="majority matched to this TTC")
    parser.add_argument("--grader-workers", type=int, default=2, help="sandboxed tests at once")
    parser.add_argument("--max-tokens", type=int, help="per call (default: none, as the paper)")
    parser.add_argument("--max-concurrency", type=int, default=256, help="calls in flight")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    return parser.parse_args(argv)


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    datasets = dict(item.split("=", 1) for item in args.dataset if "=" in item)
    if len(datasets) != len(args.dataset):
        print("reproduce_table1: error: --dataset takes KEY=SPEC", file=sys.stderr)
        return 2
    judge = None
    if args.judge_base_url and args.judge_model:
        url, name = args.judge_base_url, args.judge_model
        key = os.environ.get("PACORE_JUDGE_API_KEY")

        def judge(cache: Path) -> JudgeGrader:
            return JudgeGrader(url, name, api_key=key, cache_path=cache)

    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens)
    config = PaCoReConfig(sampling=sampling, max_concurrency=args.max_concurrency)
    client = OpenAICompatClient(args.base_url, args.model)
    try:
        with CodeGrader(workers=args.grader_workers) as code:
            path = await run_table1(
                client,
                config=config,
                out_dir=args.out,
                datasets=datasets,
                benchmarks=[b.strip() for b in args.benchmarks.split(",") if b.strip()],
                methods=BASE_METHODS,
                match_to=args.match_to,
                samples=args.samples,
                limit=args.limit,
                code_grader=code,
                judge=judge,
                progress=args.progress,
            )
    except (PaCoReError, ValueError) as exc:
        print(f"reproduce_table1: error: {exc}", file=sys.stderr)
        return 2
    finally:
        await client.aclose()
    print(path.read_text(encoding="utf-8"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
