"""The ``pacore`` command.

``pacore run "QUESTION"`` answers one question; ``pacore run --input F --output
G`` runs a dataset. With no ``--base-url`` it starts the embedded model (a
llama.cpp server on loopback serving SmolLM2-135M-Instruct), runs, and stops
it.

Exit codes (the same for every command, stated in ``pacore --help``):

- 0: done;
- 1: a run failed (or a problem of a dataset failed);
- 2: bad arguments or unusable input (nothing was run);
- 3: done, but some input lines were skipped (each reported on stderr with
  its line number); 1 wins when problems also failed.
- 130 / 143: ``run`` or ``eval`` stopped by Ctrl-C / SIGTERM (cancelled
  cleanly: the same command resumes).

Every error is one line on stderr (``pacore: error: ...``), never a traceback.

The package holds one module per concept: ``parser`` (every subcommand's
flags), ``command_args`` (``RunArgs``, ``EvalArgs``: what ``run`` and ``eval``
get once ``main`` has parsed the namespace), ``common`` (exit codes,
``UsageError``, argument checks, endpoint, client, tracing, checkpoints) and
one module per command family (``run``, ``eval``, ``swe``, ``graph``, ``rl``,
``serve``, ``model``, ``data``). What the modules share is public within the
package (in the sharing module's ``__all__``). ``main`` builds only the named
command's flags and imports only that command's module; each imports only
light modules at the top and heavy ones inside the command body, so ``pacore
--help`` stays fast and ``pacore run`` reaches its first request sooner.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any

from pacore_graph.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SKIPPED_INPUT,
    EXIT_USAGE,
    UsageError,
    resolve_settings,
)
from pacore_graph.cli.parser import build_parser, command_in
from pacore_graph.errors import PaCoReError
from pacore_graph.settings.options import EMBEDDED_MAX_CONCURRENCY, EMBEDDED_MAX_TOKENS

__all__ = [
    "EMBEDDED_MAX_CONCURRENCY",
    "EMBEDDED_MAX_TOKENS",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SKIPPED_INPUT",
    "EXIT_USAGE",
    "build_parser",
    "main",
]


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_in(words))  # only the named command's flags
    args = parser.parse_args(words)
    import asyncio  # not before: ``pacore --help`` need not pay for it

    from pacore_graph.cli.signals import Terminated, Termination

    terminate = Termination()  # SIGTERM stops run/eval as Ctrl-C does
    try:
        args = resolve_settings(args)
        if args.command in ("run", "eval"):
            from pacore_graph.cli.command_args import EvalArgs, RunArgs, from_namespace
            from pacore_graph.control.gc_tuning import fan_out_gc
            from pacore_graph.runs.private_files import private_umask

            # The namespace ends here: the command (and a --ray task) gets its record.
            running: Callable[[], Coroutine[Any, Any, int]]
            if args.command == "run":
                from pacore_graph.cli.run import run_command

                running = partial(run_command, from_namespace(RunArgs, args))
            else:
                from pacore_graph.cli.eval import eval_command

                running = partial(eval_command, from_namespace(EvalArgs, args))
            # fan_out_gc: thousands of explorer tasks, collect less often; private_umask:
            # what the command writes (results, checkpoints, reports) is the user's alone.
            with fan_out_gc(), terminate, private_umask():
                return asyncio.run(terminate.run(running()))
        if args.command == "data":
            from pacore_graph.cli.data import data_command

            return data_command(args)
        if args.command == "serve":
            from pacore_graph.cli.serve import serve_command

            return serve_command(args)
        if args.command == "graph":
            from pacore_graph.cli.graph import graph_command

            return graph_command(args)
        if args.command == "swe":
            from pacore_graph.cli.swe import swe_command

            return asyncio.run(swe_command(args))
        if args.command in ("export-episodes", "trainset", "train"):
            from pacore_graph.cli.rl import rl_command

            return rl_command(args)
        if args.command == "model":
            from pacore_graph.cli.model import model_command

            return model_command(args)
    except UsageError as exc:
        print(f"pacore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PaCoReError as exc:
        print(f"pacore: run failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        # A file that became unwritable mid-run, a full disk: one line, not a traceback.
        where = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else exc
        print(f"pacore: error: {where}", file=sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, Terminated):
        if terminate.received:
            print("pacore: terminated (SIGTERM); run the same command to resume", file=sys.stderr)
            return 143
        print("pacore: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command!r}")
    return 2  # pragma: no cover
