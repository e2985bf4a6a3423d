"""``pacore serve``: PaCoRe behind an OpenAI-compatible API (the ``[serve]`` extra).

Without ``--upstream`` it starts the embedded model and serves PaCoRe over it,
as ``pacore run`` does without ``--base-url``: one command gives a working
server on a CPU-only machine. The settings are checked first (exit 2 before
anything starts); the embedded model stops when the server does.

Guard rails checked before the server starts (exit 2): an ``--upstream``
carrying ``user:pass@`` is refused (the key goes in ``--upstream-api-key``),
and so is a ``--host`` off loopback without an API key, unless
``--allow-no-auth`` says so (then a warning is printed): anyone who can reach
a keyless server spends its upstream's compute.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from typing import Any

from pacore_graph.cli.common import UsageError, format_validation, run_tracing
from pacore_graph.settings.fields import SERVE_SETTINGS

__all__ = ["serve_command"]


def serve_command(args: argparse.Namespace) -> int:

    from pydantic import ValidationError

    from pacore_graph.values.compaction import compactor_from_name

    try:
        from pacore_graph.serve import API_KEY_ENV_VAR, ServeSettings, serve
        from pacore_graph.serve.server import is_loopback
    except ImportError as exc:
        raise UsageError(
            f"pacore serve needs the serve extra (pip install 'pacore-graph[serve]'): {exc}"
        ) from None
    api_key = args.api_key or None  # --api-key, else PACORE_SERVE_API_KEY
    upstreams = tuple(args.upstream or ())
    if upstreams and not args.model:
        raise UsageError("--model is required with --upstream (the upstreams' served model)")
    if args.model and not upstreams:
        raise UsageError(
            "--model names the --upstream's model; without --upstream the embedded model is served"
        )
    try:  # the bounds ServeSettings does not hold (it takes no limit as None, not 0)
        for name in ("queue_timeout", "port"):
            SERVE_SETTINGS[name].check(getattr(args, name), SERVE_SETTINGS[name].option_string)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # Checked before the embedded model starts; its URL and name replace these then.
    placeholder = ("http://127.0.0.1:1/v1",), "embedded"
    try:
        compactor_from_name(args.compactor)
        base = args.settings.to_config()  # the sampling and retry rows this command lists
        settings = ServeSettings(
            upstreams=upstreams or placeholder[0],
            model=args.model or placeholder[1],
            api_key=api_key,
            upstream_api_key=args.upstream_api_key,
            max_concurrency=args.max_concurrency,
            max_queue=args.max_queue,
            queue_timeout_s=args.queue_timeout if args.queue_timeout > 0 else None,
            passthrough=args.passthrough,
            max_samples_in_flight=args.max_samples_in_flight,
            compactor=args.compactor,
            sampling=base.sampling,
            retry=base.retry,
            limits=args.settings.limits(),
            max_body_bytes=args.max_body_bytes,
            max_connections=args.max_connections,
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
        )
    except ValidationError as exc:
        raise UsageError(format_validation(exc)) from None
    except (ValueError, ImportError, AttributeError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    if api_key is None and not is_loopback(args.host):
        if not args.allow_no_auth:
            raise UsageError(
                f"--host {args.host} is reachable from other machines and no API key is set: "
                f"give --api-key (or {API_KEY_ENV_VAR}), or --allow-no-auth to serve open"
            )
        print(
            f"pacore serve: WARNING: serving on {args.host} WITHOUT AUTHENTICATION "
            "(--allow-no-auth): anyone who can reach this port can start runs on your "
            "upstream model",
            file=sys.stderr,
            flush=True,
        )
    where = {
        "host": args.host,
        "port": args.port,
        "drain_timeout": args.drain_timeout,
        "log_level": args.log_level,
    }
    with run_tracing(
        args.settings
    ) as tracing:  # --trace: flushed and shut down when the server stops
        settings = dataclasses.replace(settings, tracing=tracing)
        if upstreams:
            serve(settings, **where)
        else:
            asyncio.run(_over_the_embedded_model(settings, where))
    return 0


async def _over_the_embedded_model(settings: Any, where: dict[str, Any]) -> None:
    """Serve over the embedded model, started here (no ``--upstream``)."""
    from pacore_graph.embedded import model_endpoint
    from pacore_graph.serve.server import serve_async

    print(
        "starting the embedded model server (SmolLM2-135M-Instruct, llama.cpp)...",
        file=sys.stderr,
        flush=True,
    )
    async with model_endpoint(None, None) as (base_url, model):
        embedded = dataclasses.replace(settings, upstreams=(base_url,), model=model)
        await serve_async(embedded, **where)
