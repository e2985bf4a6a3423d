"""``pacore eval --suite table1``: the paper's Table 1 in one command (docs/reproduce.md).

The suite runs :func:`pacore_graph.eval.table1.run_table1` against the
command's endpoint (``--base-url``/``--model``, or the embedded model), with
the command's sampling options, ``--samples``, ``--limit``, ``--grader-workers``
and judge flags, into ``--out``; ``--suite-dataset KEY=SPEC`` reads one
benchmark from a local copy in the hub's format instead of the hub. Its
methods are fixed (the paper's), so ``--methods`` and ``--grader`` are
refused with it rather than silently ignored.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pacore_graph.cli.common import (
    EXIT_OK,
    UsageError,
    hold_output,
    make_client,
    open_endpoint,
    prepare_run,
)

if TYPE_CHECKING:
    from pacore_graph.cli.command_args import EvalArgs

__all__ = ["SUITES", "add_suite_args", "run_suite"]

SUITES = ("table1",)


def add_suite_args(parser: argparse.ArgumentParser) -> None:
    """``--suite`` and ``--suite-dataset`` (docs/reproduce.md)."""
    parser.add_argument(
        "--suite",
        choices=SUITES,
        help="run a fixed suite instead of --dataset/--methods: table1 = the paper's four "
        "benchmarks and methods, written to OUT/table1.md (default: none)",
    )
    parser.add_argument(
        "--suite-dataset",
        action="append",
        default=[],
        metavar="KEY=SPEC",
        help="with --suite: read benchmark KEY (hmmt25, livecodebench, hle, multichallenge) "
        "from SPEC, e.g. hmmt25=hmmt25:/data/hmmt.parquet (repeatable; default: the hub)",
    )


def _suite_datasets(items: list[str]) -> dict[str, str]:
    from pacore_graph.eval.table1 import TABLE1

    keys = {b.key for b in TABLE1}
    found: dict[str, str] = {}
    for item in items:
        key, sep, spec = item.partition("=")
        if not sep or not spec or key not in keys:
            offer = ", ".join(sorted(keys))
            raise UsageError(f"--suite-dataset {item!r}: expected KEY=SPEC, KEY one of {offer}")
        found[key] = spec
    return found


async def run_suite(args: EvalArgs, category_graders: dict[str, Any]) -> int:
    """Run ``args.suite`` and print ``table1.md``; usage errors before any model call."""
    from pacore_graph.eval.benchmarks.base import DatasetError
    from pacore_graph.eval.harness import RESULTS
    from pacore_graph.eval.judge import JudgeGrader
    from pacore_graph.eval.table1 import run_table1

    if args.dataset:
        raise UsageError(
            "--suite runs its own datasets; use --suite-dataset KEY=SPEC, not --dataset"
        )
    if args.grader:
        raise UsageError("--suite grades by each benchmark's rule; drop --grader")
    datasets = _suite_datasets(args.suite_dataset)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a file; pacore eval writes a folder there")
    config, compactor = prepare_run(args.settings)
    judge = category_graders.get("judge")

    def make_judge(cache: Any) -> Any:
        assert isinstance(judge, JudgeGrader)
        return judge.with_cache(cache)

    from pacore_graph.runs.private_files import private_dir

    private_dir(args.out)
    with hold_output(args.out / RESULTS, "--out"):
        async with (
            open_endpoint(args.settings) as endpoint,
            make_client(args.settings, endpoint, config) as client,
        ):
            try:
                path = await run_table1(
                    client,
                    config=config,
                    out_dir=args.out,
                    datasets=datasets,
                    samples=args.samples,
                    limit=args.limit,
                    code_grader=category_graders["code"].code,
                    judge=make_judge if judge is not None else None,
                    progress=not args.settings.no_progress,
                    compactor=compactor,
                )
            except (ValueError, DatasetError) as exc:
                raise UsageError(str(exc)) from None
    print(path.read_text(encoding="utf-8"))
    print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK
