"""``pacore export-episodes``, ``trainset`` and ``train``: the RL commands (the ``[rl]`` extra)."""

from __future__ import annotations

import argparse
from typing import Any

from pacore_graph.cli.common import UsageError

__all__ = ["rl_command"]


def _grader_arg(spec: str | None) -> Any:
    if not spec:
        return None
    from pacore_graph.eval.graders import grader_from_name

    try:
        return grader_from_name(spec)
    except (ValueError, ImportError, TypeError) as exc:
        raise UsageError(f"--grader: {exc}") from None


def _reporters(value: str) -> str | list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise UsageError("--report-to: name at least one reporter, or none")
    return names[0] if len(names) == 1 else names


def rl_command(args: argparse.Namespace) -> int:
    """export-episodes, trainset and train: bad input and a missing [rl] extra exit 2."""
    from pacore_graph.rl.processes import LaunchError

    try:
        if args.command == "export-episodes":
            from pacore_graph.rl.export import export_command

            export_command(args.results, args.out, args.format, grader=_grader_arg(args.grader))
        elif args.command == "trainset":
            from pacore_graph.rl.recipe import build_trainset_command

            build_trainset_command(
                args.sources,
                args.out,
                fmt=args.format,
                min_messages=args.min_messages,
                max_messages=args.max_messages,
                prompts_per_problem=args.prompts_per_problem,
                seed=args.seed,
                math_threshold=args.math_threshold,
                code_threshold=args.code_threshold,
                no_stage1=args.no_stage1,
                synthesis_results=args.synthesis_results,
                grader=_grader_arg(args.grader),
                compactor=args.compactor,
            )
        else:
            from pacore_graph.rl.train import train_command

            train_command(
                args.dataset,
                args.model,
                args.algo,
                args.max_steps,
                output_dir=args.output_dir,
                num_generations=args.num_generations,
                per_device_train_batch_size=args.batch_size,
                max_completion_length=args.max_completion_length,
                learning_rate=args.learning_rate,
                compactor=args.compactor,
                grader=_grader_arg(args.grader),
                seed=args.seed,
                use_cpu=True if args.cpu else None,
                config_file=args.config,
                report_to=_reporters(args.report_to),
                kl_coef=args.kl_coef,
                scale_rewards=args.scale_rewards,
                gradient_checkpointing=True if args.gradient_checkpointing else None,
            )
    except (FileNotFoundError, ValueError, ImportError, LaunchError) as exc:
        raise UsageError(str(exc)) from None
    return 0
