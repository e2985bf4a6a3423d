"""``pacore serve``: PaCoRe behind an OpenAI-compatible API (the ``[serve]`` extra)."""

from __future__ import annotations

import argparse
from typing import Any

from pacore_graph.cli.common import UsageError, _format_validation

__all__ = ["_serve"]


def _serve(args: argparse.Namespace) -> int:
    import os

    from pydantic import ValidationError

    from pacore_graph.compaction import compactor_from_name
    from pacore_graph.config import RetryPolicy, SamplingParams

    try:
        from pacore_graph.serve import API_KEY_ENV_VAR, ServeSettings, serve
    except ImportError as exc:
        raise UsageError(
            f"pacore serve needs the serve extra (pip install 'pacore-graph[serve]'): {exc}"
        ) from None
    sampling: dict[str, Any] = {}
    for key in ("temperature", "top_p", "max_tokens", "timeout"):
        value = getattr(args, key)
        if value is not None:
            sampling[key] = value
    try:
        compactor_from_name(args.compactor)
        settings = ServeSettings(
            upstreams=tuple(args.upstream),
            model=args.model,
            api_key=args.api_key or os.environ.get(API_KEY_ENV_VAR) or None,
            upstream_api_key=args.upstream_api_key,
            max_concurrency=args.max_concurrency,
            max_samples_in_flight=args.max_samples_in_flight,
            compactor=args.compactor,
            sampling=SamplingParams(**sampling),
            retry=RetryPolicy(max_attempts=args.retries) if args.retries else RetryPolicy(),
        )
    except ValidationError as exc:
        raise UsageError(_format_validation(exc)) from None
    except (ValueError, ImportError, AttributeError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in [0, 65535], got {args.port}")
    serve(
        settings,
        host=args.host,
        port=args.port,
        drain_timeout=args.drain_timeout,
        log_level=args.log_level,
    )
    return 0
