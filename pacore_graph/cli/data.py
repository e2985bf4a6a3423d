"""``pacore data``: generate evaluation datasets."""

from __future__ import annotations

import argparse

from pacore_graph.cli.common import UsageError, _writable_file

__all__ = ["_data"]


def _data(args: argparse.Namespace) -> int:
    from pacore_graph.eval.datasets import generate_dataset

    _writable_file(args.out, "--out")
    try:
        count = generate_dataset(args.kind, args.n, args.seed, args.out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {count} {args.kind} problems to {args.out}")
    return 0
