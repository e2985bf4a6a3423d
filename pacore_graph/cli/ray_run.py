"""``pacore run --input``/``pacore eval`` with ``--ray ADDRESS|local``: shares as Ray tasks.

The plan, the scheduling and the merge are :mod:`pacore_graph.runs.ray_cluster`'s;
this module is the command's side: what a task runs (the same dataset run
as ``pacore run --input``, on its share's files, with the command's
settings) and the report once the shares are merged.

A task carries the command's record (:class:`~pacore_graph.cli.command_args.RunArgs`
or :class:`~pacore_graph.cli.command_args.EvalArgs`: the resolved settings and
the command's own flags), its share's files put in with
:func:`dataclasses.replace`: what is pickled to a Ray worker is that record,
never the parser's namespace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacore_graph.cli.common import EXIT_FAILED, EXIT_OK, EXIT_SKIPPED_INPUT, UsageError
from pacore_graph.errors import PaCoReError

if TYPE_CHECKING:
    from pacore_graph.cli.command_args import EvalArgs, RunArgs
    from pacore_graph.runs.ray_cluster import Share
    from pacore_graph.settings.env_settings import PaCoReSettings

__all__ = ["eval_on_ray", "run_on_ray"]

#: What a ``pacore run`` share runs: ``pacore run``'s coroutine function.
RunCommand = Callable[["RunArgs"], Coroutine[Any, Any, int]]
#: What a ``pacore eval`` share runs: ``pacore eval``'s coroutine function.
EvalCommand = Callable[["EvalArgs"], Coroutine[Any, Any, int]]


def run_on_ray(
    args: RunArgs,
    records: list[Any],
    input_errors: list[Any],
    command: RunCommand,
) -> int:
    """Run ``records`` over Ray (``args.ray``, ``args.ray_workers``); merge into ``args.output``.

    ``command`` is what each task runs on its share's record (``pacore run``'s own
    coroutine: passed in, so that this module does not import the command back).
    """
    from pacore_graph.runs.ray_cluster import merge_shares, plan_shares, run_shares
    from pacore_graph.runs.results_file import ResultLine, read_results
    from pacore_graph.runs.runner import finished_ids

    if not args.settings.base_url:
        raise UsageError("--ray needs --base-url: every Ray task calls the same upstreams")
    workers = args.ray_workers
    if workers < 1:
        raise UsageError(f"--ray-workers must be >= 1, got {workers}")
    assert args.ray is not None and args.output is not None  # run_command checked both
    output: Path = args.output
    done = finished_ids(output)
    todo = [r for r in records if r.id not in done]
    shares = plan_shares(todo, output, workers)
    failure: BaseException | None = None
    try:
        codes = run_shares(
            shares, partial(_run_share, command, args), address=args.ray, workers=workers
        )
    except ValueError as exc:
        merge_shares(output, shares, keep_checkpoints=True)
        raise UsageError(str(exc)) from None
    except Exception as exc:  # a task that failed for good (Ray's own error types)
        failure = exc
        codes = []
    merge_shares(output, shares, keep_checkpoints=failure is not None)
    if failure is not None:
        text = str(failure).strip().splitlines()
        raise PaCoReError(
            f"a Ray task failed for good ({text[-1] if text else type(failure).__name__}); "
            "the same command resumes the run"
        )
    wanted = {r.id for r in records}
    ok = failed = 0
    for item in read_results(output):
        if isinstance(item, ResultLine) and item.problem_id in wanted:
            ok, failed = (ok + 1, failed) if item.ok else (ok, failed + 1)
    report = {
        "output": str(output),
        "problems": len(records),
        "skipped_finished": len(records) - len(todo),
        "succeeded": ok,
        "failed": failed,
        "input_errors": len(input_errors),
        "ray_tasks": len(codes),
    }
    print(json.dumps(report) if args.json else " ".join(f"{k}={v}" for k, v in report.items()))
    if failed:
        return EXIT_FAILED
    return EXIT_SKIPPED_INPUT if input_errors else EXIT_OK


def _run_share(command: RunCommand, args: RunArgs, share: Share) -> int:
    """One Ray task: ``pacore run --input SHARE --output SHARE_RESULTS``, the same settings."""
    from pacore_graph.control.gc_tuning import fan_out_gc

    mine = dataclasses.replace(
        args,
        settings=_quiet(args.settings),
        input=str(share.input),
        output=share.output,
        since=None,
        until=None,
        ray=None,
        checkpoint=_share_checkpoint(args.checkpoint, share),
    )
    try:
        with fan_out_gc():
            return asyncio.run(command(mine))
    except UsageError as exc:
        raise RuntimeError(f"pacore: error: {exc}") from None


def _quiet(settings: PaCoReSettings) -> PaCoReSettings:
    """The settings with no progress bar: a task's output goes nowhere anyone reads."""
    return settings.model_copy(update={"no_progress": True})


def _share_checkpoint(spec: str | None, share: Share) -> str | None:
    """The share's store: its own SQLite file, unless a shared store (or none) was given."""
    if spec is None:
        return None  # the default: beside the share's results
    text = spec.strip()
    if text.lower() in ("none", "off", "memory", "") or text.startswith(
        ("postgresql://", "postgres://")
    ):
        return spec
    path = text[len("sqlite:///") :] if text.startswith("sqlite:///") else text
    return f"{path}.ray-{share.index}-of-{share.count}"


def eval_on_ray(args: EvalArgs, records: list[Any], command: EvalCommand) -> None:
    """``pacore eval --ray``: each share is a ``pacore eval`` into ``DIR/ray-k-of-N/``.

    Their result lines are merged into ``DIR/results.jsonl``; the caller then
    runs the eval as usual, which finds those runs done and writes the
    report and plot (and retries, in this process, a run that failed).
    """
    import shutil

    from pacore_graph.eval.harness import RESULTS
    from pacore_graph.runs.ray_cluster import merge_shares, plan_shares, run_shares

    if not args.settings.base_url:
        raise UsageError("--ray needs --base-url: every Ray task calls the same upstreams")
    assert args.ray is not None  # eval_command checked it
    if args.ray_workers < 1:
        raise UsageError(f"--ray-workers must be >= 1, got {args.ray_workers}")
    shares = plan_shares(records, args.out / RESULTS, args.ray_workers)
    folders = {s.index: args.out / f"ray-{s.index}-of-{s.count}" for s in shares}
    try:
        run_shares(
            shares,
            partial(_eval_share, command, args, folders),
            address=args.ray,
            workers=args.ray_workers,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # a task that failed for good (Ray's own error types)
        merged = [dataclasses.replace(s, output=folders[s.index] / RESULTS) for s in shares]
        merge_shares(args.out / RESULTS, merged, keep_checkpoints=True)
        text = str(exc).strip().splitlines()
        raise PaCoReError(
            f"a Ray task failed for good ({text[-1] if text else type(exc).__name__}); "
            "the same command resumes the eval"
        ) from None
    merged = [dataclasses.replace(s, output=folders[s.index] / RESULTS) for s in shares]
    merge_shares(args.out / RESULTS, merged)
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)


def _eval_share(
    command: EvalCommand, args: EvalArgs, folders: dict[int, Path], share: Share
) -> int:
    """One Ray task: ``pacore eval --dataset SHARE --out DIR/ray-k-of-N``, the same settings."""
    from pacore_graph.control.gc_tuning import fan_out_gc

    mine = dataclasses.replace(
        args,
        settings=_quiet(args.settings),
        dataset=str(share.input),
        out=folders[share.index],
        since=None,
        until=None,
        limit=None,
        ray=None,
        checkpoint=_share_checkpoint(args.checkpoint, share),
    )
    try:
        with fan_out_gc():
            return asyncio.run(command(mine))
    except UsageError as exc:
        raise RuntimeError(f"pacore: error: {exc}") from None
