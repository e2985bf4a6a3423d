"""The ``pacore run`` command line the CLI tests build again and again, in one place.

The order is fixed (``run --input DATA --output OUT --rounds R ...``): some
tests swap the output by its position.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["run_argv"]


def run_argv(
    data: Path,
    out: Path,
    rounds: str,
    *extra: str,
    base_url: str | None = None,
    model: str | None = None,
) -> list[str]:
    """``run --input DATA --output OUT --rounds R [--base-url U] [--model M] EXTRA...``."""
    argv = ["run", "--input", str(data), "--output", str(out), "--rounds", rounds]
    if base_url is not None:
        argv += ["--base-url", base_url]
    if model is not None:
        argv += ["--model", model]
    return [*argv, *extra]
