"""``pacore model install | serve | export``: the embedded model, and serving a folder.

``model serve`` with no folder runs the embedded server in the foreground
(the same server ``pacore run`` starts as a child when given no
``--base-url``): SmolLM2-135M-Instruct with the ``n`` samples of a request
and all concurrent requests decoded together, for any OpenAI client. With a
folder it serves that Hugging Face model with ``transformers``.

Neither server checks an API key, so a ``--host`` off loopback is refused
(exit 2) unless ``--allow-no-auth`` says so, and then a warning is printed:
anyone who can reach the port uses the model (issue 31 found it bound the
network silently). A keyed endpoint is ``pacore serve --upstream`` with
``--api-key`` in front: it relays the model's own name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from pacore_graph.cli.common import UsageError

__all__ = ["model_command"]


def _serve_embedded(host: str, port: int, name: str | None) -> int:
    """The embedded model on ``host:port`` until Ctrl-C; prints its base URL and model name."""
    from pacore_graph.embedded import DEFAULT_MODEL_ALIAS, EmbeddedServer, EmbeddedServerError
    from pacore_graph.embedded.server import EngineOptions, serve_embedded

    config = EmbeddedServer(host=host, port=port, model_alias=name or DEFAULT_MODEL_ALIAS)
    try:
        options = EngineOptions(
            model_path=config.resolved_model_path(),
            model_alias=config.model_alias,
            n_ctx=config.n_ctx,
            max_sequences=config.max_sequences,
            kv_tokens=config.kv_budget,
            n_threads=config.threads,
        )
    except EmbeddedServerError as exc:
        raise UsageError(str(exc)) from None

    def ready(url: str) -> None:
        print(
            f"serving {options.model_alias} at {url} (OpenAI-compatible; any API key; "
            f"n up to {options.max_sequences}); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        print(f"base_url={url} model={options.model_alias}", flush=True)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_embedded(options, host, port, ready))
    except OSError as exc:
        raise UsageError(f"cannot serve on {host}:{port}: {exc}") from None
    return 0


def _check_host(host: str, allow_no_auth: bool) -> None:
    """Refuse a ``--host`` off loopback without ``--allow-no-auth``; warn with it."""
    from pacore_graph.embedded.server import is_loopback

    if is_loopback(host):
        return
    if not allow_no_auth:
        raise UsageError(
            f"--host {host} is reachable from other machines and pacore model serve checks no "
            "API key: give --allow-no-auth to serve it open, or keep it on 127.0.0.1 and put "
            "pacore serve --upstream ... --api-key KEY in front"
        )
    print(
        f"pacore model serve: WARNING: serving on {host} WITHOUT AUTHENTICATION "
        "(--allow-no-auth): anyone who can reach this port can use the model",
        file=sys.stderr,
        flush=True,
    )


def model_command(args: argparse.Namespace) -> int:
    """model install / serve / export: bad input and a missing extra exit 2."""
    try:
        if args.model_command == "install":
            from pacore_graph.embedded.weights import install_weights

            return 0 if install_weights() == 0 else 1
        if args.model_command == "export":
            from pacore_graph.rl.model_export import model_export_command

            model_export_command(args.out, gguf=args.gguf, dtype=args.dtype)
            return 0
        _check_host(args.host, args.allow_no_auth)
        if args.model_dir is None:
            return _serve_embedded(args.host, args.port, args.name)
        from pacore_graph.rl.model_server import serve_command

        return serve_command(args.model_dir, host=args.host, port=args.port, name=args.name)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
