"""``pacore eval``'s grader options: ``--grader-workers`` and the judge, and the graders they make.

Kept apart from the parser table so the grader flags live in one place:
:func:`add_grader_args` declares them, :func:`eval_graders` turns them into
the ``grader`` and ``category_graders`` :func:`~pacore_graph.eval.harness.run_eval`
takes. The judge's API key, if its server needs one, comes from the
``PACORE_JUDGE_API_KEY`` variable, never from a flag (argv is visible to
every user of the machine).
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from typing import TYPE_CHECKING, Any

from pacore_graph.cli.common import UsageError

if TYPE_CHECKING:
    from pacore_graph.cli.command_args import EvalArgs

__all__ = ["JUDGE_API_KEY_ENV", "add_grader_args", "eval_graders"]

JUDGE_API_KEY_ENV = "PACORE_JUDGE_API_KEY"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def add_grader_args(parser: argparse.ArgumentParser) -> None:
    """The code grader's and the judge's flags (docs/eval.md, "Code and judged tasks")."""
    parser.add_argument(
        "--grader-workers",
        type=_positive_int,
        default=2,
        help="code grader: sandboxed test runs at once, across all answers (default: 2)",
    )
    parser.add_argument(
        "--judge-base-url",
        help="OpenAI-compatible server of the LLM judge for --grader judge and judged "
        f"benchmarks (hle, multichallenge); key from {JUDGE_API_KEY_ENV} (default: none)",
    )
    parser.add_argument("--judge-model", help="the judge's model name (default: none)")
    parser.add_argument(
        "--judge-rubric",
        default="auto",
        choices=("auto", "hle", "multichallenge"),
        help="the judge's rubric (default: auto, by each record's ground truth)",
    )


def eval_graders(args: EvalArgs) -> tuple[Any, dict[str, Any]]:
    """``(grader, category_graders)`` from the flags; :class:`UsageError` for a bad combination.

    ``--grader code`` and ``--grader judge`` are built here with the flags
    above; any other ``--grader`` goes through ``grader_from_name``. Without
    ``--grader``, records of category ``code`` get a code grader with
    ``--grader-workers`` and records of category ``judge`` the configured
    judge (or, with none, a grade that says a judge is needed).
    """
    from pacore_graph.eval.code_grader import CodeGrader
    from pacore_graph.eval.graders import CodeOrAnswerGrader, grader_from_name
    from pacore_graph.eval.judge import JUDGE_CACHE_FILE, JudgeGrader

    judge: Any = None
    url, model = args.judge_base_url, args.judge_model
    if url or model:
        if not (url and model):
            raise UsageError("--judge-base-url and --judge-model go together")
        parts = urllib.parse.urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise UsageError(f"--judge-base-url: put no user:pass@ in it; use {JUDGE_API_KEY_ENV}")
        try:
            judge = JudgeGrader(
                url,
                model,
                api_key=os.environ.get(JUDGE_API_KEY_ENV) or None,
                rubric=args.judge_rubric,
                cache_path=args.out / JUDGE_CACHE_FILE,
            )
        except ValueError as exc:
            raise UsageError(f"--judge-base-url: {exc}") from None
    code = CodeGrader(workers=args.grader_workers)
    grader: Any = None
    if args.grader == "judge":
        if judge is None:
            raise UsageError("--grader judge needs --judge-base-url URL and --judge-model NAME")
        grader = judge
    elif args.grader == "code":
        grader = code
    elif args.grader:
        try:
            grader = grader_from_name(args.grader)
        except (ValueError, ImportError, TypeError) as exc:
            raise UsageError(f"--grader: {exc}") from None
    category_graders: dict[str, Any] = {"code": CodeOrAnswerGrader(code)}
    if judge is not None:
        category_graders["judge"] = judge
    return grader, category_graders
