"""``pacore run``: one question (live output or ``--json``), or a JSONL dataset (resumable)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacore_graph.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SKIPPED_INPUT,
    UsageError,
    check_method_settings,
    checkpoint_saver,
    hold_output,
    make_client,
    open_endpoint,
    prepare_run,
    readable_file,
    run_summary,
    run_tracing,
    utf8_text,
    writable_file,
)
from pacore_graph.cli.dataset_arg import check_dataset_arg, load_dataset_arg

if TYPE_CHECKING:
    from pacore_graph.cli.command_args import RunArgs
    from pacore_graph.otel.spans import TraceOptions
    from pacore_graph.settings.config import PaCoReConfig
    from pacore_graph.settings.grammar import MethodSpec
    from pacore_graph.values.records import PaCoReResult

__all__ = ["run_command"]


async def run_command(args: RunArgs) -> int:
    """``pacore run``: checks before any model call, then the question, the dataset or --ray."""
    if args.input is None and not args.question:
        raise UsageError("give a QUESTION, or --input data.jsonl --output results.jsonl")
    if args.input is not None and args.question:
        raise UsageError("give either a QUESTION or --input, not both")
    if args.input is not None and args.output is None:
        raise UsageError("--input needs --output (results are written as each problem finishes)")
    if args.question is not None and not args.question.strip():
        raise UsageError("empty problem: the question has no text")
    if args.question is not None:
        utf8_text(args.question, "the question")
    config, compactor = prepare_run(args.settings)
    method = _method(args)
    check_method_settings(
        args.settings,
        args.flags_given,
        {method.family if method is not None else "pacore"},
        f"--method {method.text}" if method is not None else "PaCoRe",
    )
    template = _template(args.template)
    if args.output is not None:
        writable_file(args.output, "--output")
    records: list[Any] = []
    input_errors: list[Any] = []
    if args.input is None and (args.since or args.until):
        raise UsageError("--since/--until select problems of a dataset: give --input")
    if args.input is not None:
        spec = check_dataset_arg(args.input, "--input")
        loaded = load_dataset_arg(spec, "--input", since=args.since, until=args.until)
        records, input_errors = loaded.records, loaded.input_errors
        if not records:
            raise UsageError(f"{args.input}: no usable records")

    # One writer per results file: a second run on it is refused before any model call.
    holding = (
        hold_output(args.output, "--output")
        if args.input is not None and args.output is not None  # --input needs --output
        else contextlib.nullcontext()
    )
    from pacore_graph.runs.loop_lag import loop_lag_probe  # no-op unless PACORE_LOOP_LAG_FILE

    if args.ray is not None:
        if args.input is None:
            raise UsageError("--ray runs a dataset: give --input and --output")
        from pacore_graph.cli.ray_run import run_on_ray

        with holding:  # the shares run in Ray tasks; this process merges their lines
            return run_on_ray(args, records, input_errors, run_command)  # main thread, as Ray asks
    with holding, run_tracing(args.settings) as trace_options:
        async with loop_lag_probe():
            return await _run_with(
                args, config, compactor, template, records, input_errors, trace_options, method
            )


def _method(args: RunArgs) -> MethodSpec | None:
    """``--method SPEC`` parsed before anything starts (a bad spec sends nothing)."""
    text = args.method
    if not text:
        return None
    from pacore_graph.settings.grammar import parse_method

    try:
        spec = parse_method(text)
    except ValueError as exc:
        raise UsageError(f"--method: {exc}") from None
    if args.template is not None and spec.family != "pacore":
        raise UsageError(f"--template is PaCoRe's synthesis prompt; --method {spec.text} has none")
    return spec


async def _run_with(
    args: RunArgs,
    config: PaCoReConfig,
    compactor: Any,
    template: str,
    records: list[Any],
    input_errors: list[Any],
    trace_options: TraceOptions,
    method: MethodSpec | None = None,
) -> int:
    importing = None
    if not args.settings.base_url:
        # The embedded server takes a second or two to load its model in its own
        # process: import LangGraph (~0.8 s of CPU) meanwhile, not after.
        importing = asyncio.get_running_loop().run_in_executor(
            None, importlib.import_module, "pacore_graph.graph.builder"
        )
    async with open_endpoint(args.settings) as endpoint:
        if importing is not None:
            await importing
        from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph

        async with make_client(args.settings, endpoint, config) as client:
            try:
                if method is not None and method.family != "pacore":
                    from pacore_graph.eval.methods import build_method_graph

                    graph = build_method_graph(
                        method,
                        client,
                        config=config,
                        compactor=compactor,
                        tracing=trace_options,
                        limits=args.settings.limits(),
                    )
                else:
                    if method is not None:  # pacore:SPEC names the round widths
                        config = config.with_settings({"rounds": list(method.rounds)})
                    build: Any = build_pacore_graph
                    if config.asks_confidence:  # --reference-filter, --consensus-weight
                        from pacore_graph.graphs.pacore_confidence import (
                            build_pacore_confidence_graph,
                        )

                        build = build_pacore_confidence_graph
                    # A plain run builds PaCoRe alone: no other method's module is imported.
                    graph = build(
                        client,
                        config=config,
                        compactor=compactor,
                        template=template,
                        tracing=trace_options,
                        limits=args.settings.limits(),  # the caps as validated: not built again
                    )
            except (ValueError, TypeError) as exc:
                raise UsageError(str(exc)) from None
            if args.input is None:
                question = args.question
                assert question is not None  # run_command: a QUESTION or --input
                if args.json:
                    result = await ainvoke_pacore(graph, question)
                    if args.output is not None:
                        _write_question_result(args.output, question, result)
                    print(json.dumps(result.to_dict(), ensure_ascii=False))
                    return 0
                from pacore_graph.runs.live import run_live

                result, streamed = await run_live(
                    graph,
                    question,
                    err=None if args.settings.no_progress else sys.stderr,
                    out=sys.stdout if sys.stdout.isatty() else None,
                )
                if args.output is not None:
                    _write_question_result(args.output, question, result)
                if not streamed:
                    print(result.answer.strip())
                print()
                print(run_summary(result))
                return 0
            from pacore_graph.runs.runner import PACORE_MODEL_NODES, run_dataset

            output = args.output
            assert output is not None  # run_command: --input needs --output
            async with checkpoint_saver(
                args.checkpoint, output, retry_s=args.checkpoint_timeout
            ) as saver:
                summary = await run_dataset(
                    graph,
                    records,
                    output,
                    progress=not args.settings.no_progress,
                    max_problems_in_flight=max(config.max_concurrency, 1),
                    checkpointer=saver,
                    # Only the PaCoRe graph's cheap steps are known to call no model.
                    model_nodes=PACORE_MODEL_NODES
                    if method is None or method.family == "pacore"
                    else None,
                )
            report = {
                "output": str(args.output),
                "problems": summary.total,
                "skipped_finished": summary.skipped,
                "succeeded": summary.succeeded,
                "failed": summary.failed,
                "input_errors": len(input_errors),
                "effective_ttc": summary.effective_ttc,
                "wall_s": round(summary.wall_s, 2),
            }
            if args.json:
                print(json.dumps(report))
            else:
                print(" ".join(f"{k}={v}" for k, v in report.items()))
            if summary.failed:
                return EXIT_FAILED
            return EXIT_SKIPPED_INPUT if input_errors else EXIT_OK


def _template(path: Path | None) -> str:
    """The synthesis template: the packaged one, or the user's file (read before any call)."""
    if path is None:
        from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE

        return SYNTHESIS_TEMPLATE
    readable_file(path, "--template")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--template {path}: not UTF-8 text (byte {exc.start})") from None


def _write_question_result(path: Path, question: str, result: PaCoReResult) -> None:
    """``pacore run "Q" --output F``: F gets the run's results line, as a dataset run writes."""
    from pacore_graph.runs.atomic import write_lines_atomic
    from pacore_graph.runs.runner import DatasetRecord, result_line

    record = DatasetRecord(
        id=result.problem_id or "question",
        messages=({"role": "user", "content": question},),
        line=1,
    )
    write_lines_atomic(path, [json.dumps(result_line(record, result), ensure_ascii=False)])
    print(f"wrote {path}", file=sys.stderr)
