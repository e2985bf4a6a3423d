"""``pacore data``: generate evaluation datasets."""

from __future__ import annotations

import argparse

from pacore_graph.cli.common import UsageError, writable_file

__all__ = ["data_command"]


def data_command(args: argparse.Namespace) -> int:
    from pacore_graph.eval.datasets import generate_dataset

    writable_file(args.out, "--out")
    try:
        count = generate_dataset(args.kind, args.n, args.seed, args.out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {count} {args.kind} problems to {args.out}")
    return 0
