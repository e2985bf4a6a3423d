"""``pacore model export`` / ``model serve``: the embedded model as a Hugging Face folder."""

from __future__ import annotations

import argparse

from pacore_graph.cli.common import UsageError

__all__ = ["_model"]


def _model(args: argparse.Namespace) -> int:
    """model export / model serve: bad input and a missing [rl] extra exit 2."""
    try:
        if args.model_command == "export":
            from pacore_graph.rl.model_export import model_export_command

            model_export_command(args.out, gguf=args.gguf, dtype=args.dtype)
            return 0
        from pacore_graph.rl.model_server import serve_command

        return serve_command(args.model_dir, host=args.host, port=args.port, name=args.name)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
