"""``pacore eval``: PaCoRe against baselines at matched compute, into a resumable folder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pacore_graph.cli.common import (
    EXIT_OK,
    EXIT_SKIPPED_INPUT,
    UsageError,
    check_method_settings,
    checkpoint_saver,
    hold_output,
    make_client,
    open_endpoint,
    prepare_run,
    run_tracing,
)
from pacore_graph.cli.dataset_arg import check_dataset_arg, dataset_meta, load_dataset_arg
from pacore_graph.cli.grader_args import eval_graders
from pacore_graph.cli.suite import run_suite

if TYPE_CHECKING:
    from pacore_graph.cli.command_args import EvalArgs

__all__ = ["eval_command"]


async def eval_command(args: EvalArgs) -> int:
    """``pacore eval``: checks before any model call, then the suite, the dataset or --ray."""
    from pacore_graph.eval.methods import parse_methods

    if args.samples < 1:
        raise UsageError(f"--samples must be >= 1, got {args.samples}")
    try:
        methods = parse_methods(args.methods)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    grader, category_graders = eval_graders(args)
    if args.suite:
        return await run_suite(args, category_graders)
    if not args.dataset:
        raise UsageError("--dataset is required (or --suite table1)")
    check_method_settings(
        args.settings, args.flags_given, {m.family for m in methods}, f"--methods {args.methods}"
    )
    spec = check_dataset_arg(args.dataset, "--dataset")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a file; pacore eval writes a folder there")
    config, compactor = prepare_run(args.settings)
    loaded = load_dataset_arg(spec, "--dataset", since=args.since, until=args.until)
    records, input_errors = loaded.records, loaded.input_errors
    if args.limit is not None:
        records = records[: max(0, args.limit)]
    if not records:
        raise UsageError(f"{args.dataset}: no usable records")
    from pacore_graph.eval.harness import RESULTS

    # One writer per results folder: a second eval on it is refused before any model call.
    with hold_output(args.out / RESULTS, "--out"):
        if args.ray is not None:
            from pacore_graph.cli.ray_run import eval_on_ray

            eval_on_ray(args, records, eval_command)  # the shares' runs, merged; reported below
        return await _eval_with(
            args,
            records,
            methods,
            (grader, category_graders),
            config,
            compactor,
            input_errors,
            meta=dataset_meta(loaded),
        )


async def _eval_with(
    args: EvalArgs,
    records: list[Any],
    methods: Any,
    graders: tuple[Any, Any],
    config: Any,
    compactor: Any,
    input_errors: list[Any],
    meta: dict[str, Any] | None = None,
) -> int:
    from pacore_graph.eval.harness import run_eval
    from pacore_graph.eval.methods import method_settings

    grader, category_graders = graders
    # The methods' own settings go in the report: evals differing in one are told apart.
    report_meta = {**(meta or {"dataset": str(args.dataset)}), **method_settings(methods, config)}

    async with (
        open_endpoint(args.settings) as endpoint,
        make_client(args.settings, endpoint, config) as client,
    ):
        try:
            with run_tracing(args.settings) as trace_options:
                async with checkpoint_saver(
                    args.checkpoint, args.out, eval_dir=True, retry_s=args.checkpoint_timeout
                ) as saver:
                    outcome = await run_eval(
                        records,
                        methods,
                        client,
                        config=config,
                        out_dir=args.out,
                        samples=args.samples,
                        grader=grader,
                        category_graders=category_graders,
                        compactor=compactor,
                        progress=not args.settings.no_progress,
                        meta=report_meta,
                        tracing=trace_options,
                        checkpointer=saver,
                    )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    print(outcome.report_md.read_text(encoding="utf-8"))
    print(f"wrote {outcome.report_json}, {outcome.report_md}, {outcome.plot}")
    return EXIT_SKIPPED_INPUT if input_errors else EXIT_OK
