"""``pacore graph``: draw one run's message-passing graph from a results file.

A run that is not in the file (an unknown ``--id``, a ``--method`` it was not
run with, a run that failed) is bad input like a missing file: exit 2 with
one ``pacore: error:`` line naming what the file holds, and nothing drawn.
"""

from __future__ import annotations

import argparse

from pacore_graph.cli.common import UsageError

__all__ = ["graph_command"]


def graph_command(args: argparse.Namespace) -> int:
    from pacore_graph.message_graph import ResultLookupError, graph_command

    grader = None
    if args.grader:
        from pacore_graph.eval.graders import grader_from_name

        try:
            grader = grader_from_name(args.grader)
        except (ValueError, ImportError, TypeError) as exc:
            raise UsageError(f"--grader: {exc}") from None
    try:
        path = graph_command(
            args.results,
            args.id,
            args.out,
            method=args.method,
            sample=args.sample,
            json_out=args.json_out,
            graphml_out=args.graphml,
            grader=grader,
        )
    except (FileNotFoundError, ResultLookupError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}")
    return 0
