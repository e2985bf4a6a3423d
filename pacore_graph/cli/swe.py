"""``pacore swe``: fix an issue in a repository with parallel tool-calling explorers."""

from __future__ import annotations

import argparse
import json
import sys

from pacore_graph.cli.common import (
    UsageError,
    check_writable,
    prepare_run,
    run_summary,
    run_tracing,
)

__all__ = ["swe_command"]


async def swe_command(args: argparse.Namespace) -> int:
    from pacore_graph.graphs.pacore_swe import check_repository, run_swe
    from pacore_graph.llm.langchain_client import aclose_chat_model, make_chat_model

    if not args.base_url or not args.model:
        raise UsageError(
            "pacore swe needs a tool-calling model: --base-url URL --model NAME "
            "(the embedded 135M model cannot call tools)"
        )
    if len(args.base_url) > 1:
        raise UsageError("pacore swe takes one --base-url")
    try:
        check_repository(args.repo)
    except ValueError as exc:
        raise UsageError(f"--repo {args.repo}: {exc}") from None
    if not args.issue.is_file():
        raise UsageError(f"--issue {args.issue}: no such file")
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be >= 1, got {args.max_steps}")
    if not args.test.strip():
        raise UsageError('--test is empty: give the test command, e.g. --test "pytest -q"')
    if args.diff_out is not None:
        check_writable("--diff-out", args.diff_out)
    try:
        issue = args.issue.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--issue {args.issue}: cannot read it as UTF-8 text: {exc}") from None
    if not issue.strip():
        raise UsageError(f"--issue {args.issue}: the issue text is empty")
    config, _ = prepare_run(args.settings)
    chat = make_chat_model(
        args.base_url[0],
        args.model,
        api_key=args.api_key,
        sampling=config.sampling,
        retry=config.retry,
    )
    try:
        with run_tracing(args.settings) as trace_options:
            outcome = await run_swe(
                chat,
                args.repo,
                issue,
                args.test,
                config=config,
                max_steps=args.max_steps,
                tracing=trace_options,
            )
    finally:
        await aclose_chat_model(chat)
    diff_lost = False
    if args.diff_out is not None:
        try:
            args.diff_out.write_text(outcome.diff, encoding="utf-8")
        except OSError as exc:  # checked up front, but the disk may have changed since
            print(f"pacore: error: --diff-out {args.diff_out}: {exc}", file=sys.stderr)
            diff_lost = True
    attempts = outcome.result.trajectories
    passing = sum(bool(t.artifacts.get("tests_passed")) for t in attempts)
    if args.json:
        print(
            json.dumps(
                {
                    "resolved": outcome.resolved,
                    "applied": outcome.applied,
                    "tests_passed": outcome.tests_passed,
                    "diff": outcome.diff,
                    "apply_message": outcome.apply_message,
                    "test_output": outcome.test_output,
                    "attempts_passing": passing,
                    "attempts": len(attempts),
                    "effective_ttc": outcome.result.effective_ttc,
                    "result": outcome.result.to_dict(),
                },
                ensure_ascii=False,
            )
        )
    else:
        print(outcome.diff or "(the final attempt changed nothing)")
        print(run_summary(outcome.result))
        print(f"attempts passing their tests: {passing}/{len(attempts)}")
        if not outcome.applied:
            print(f"final diff did not apply: {outcome.apply_message}")
        else:
            verdict = "PASSED" if outcome.tests_passed else "FAILED"
            print(f"final diff on a fresh copy: tests {verdict}")
        print("RESOLVED" if outcome.resolved else "NOT RESOLVED")
    if diff_lost:
        return 2  # the diff is on stdout above, not in the file that was asked for
    return 0 if outcome.resolved else 1
