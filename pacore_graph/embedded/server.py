"""Running the embedded server: load the model, start the engine thread, serve HTTP.

``python -m pacore_graph.embedded.server --model F --port P ...`` is what the
:class:`~pacore_graph.embedded.EmbeddedServer` child runs;
:func:`serve_embedded` is the same in the caller's process (``pacore model
serve`` with no folder). A model that fails to load is one line on stderr
(``Failed to load model ...``) and exit status 1.

The server checks no API key: :func:`is_loopback` is how ``pacore model
serve`` (and ``pacore serve``) tell a ``--host`` only this machine reaches
from one the network does.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from pacore_graph.embedded.app import build_app
from pacore_graph.embedded.engine import BatchEngine

__all__ = ["SHUTDOWN_TIMEOUT_S", "EngineOptions", "is_loopback", "main", "serve_embedded"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only accepts connections from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What the engine is built with (the ``EmbeddedServer`` fields of the same names)."""

    model_path: Path
    model_alias: str
    n_ctx: int
    max_sequences: int
    kv_tokens: int
    n_threads: int


def _load(options: EngineOptions) -> BatchEngine:
    try:
        return BatchEngine(
            options.model_path,
            n_ctx=options.n_ctx,
            max_sequences=options.max_sequences,
            kv_tokens=options.kv_tokens,
            n_threads=options.n_threads,
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise SystemExit(f"Failed to load model from {options.model_path}: {exc}") from None


#: Seconds a stopping server gives the requests it is still answering.
SHUTDOWN_TIMEOUT_S = 5.0


async def serve_embedded(
    options: EngineOptions,
    host: str,
    port: int,
    on_ready: Callable[[str], None],
) -> None:
    """Serve until cancelled; ``on_ready`` gets the base URL once the port is bound."""
    engine = await asyncio.get_running_loop().run_in_executor(None, _load, options)
    runner = web.AppRunner(
        build_app(engine, options.model_alias),
        handler_cancellation=True,
        access_log=None,
        # On Ctrl-C, requests still being answered get this long, not aiohttp's 60 s:
        # a client holding its connection open kept `pacore model serve` alive a minute.
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, reuse_address=True)
        await site.start()
        bound = int(runner.addresses[0][1])  # the real port when ``port`` is 0
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
        shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
        on_ready(f"http://{shown}:{bound}/v1")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        engine.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pacore_graph.embedded.server")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--model_alias", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n_ctx", type=int, default=2048)
    parser.add_argument("--max_sequences", type=int, default=16)
    parser.add_argument("--kv_tokens", type=int, default=16384)
    parser.add_argument("--n_threads", type=int, default=2)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The child's entry point: serve until terminated."""
    args = _parser().parse_args(argv)
    options = EngineOptions(
        model_path=args.model,
        model_alias=args.model_alias,
        n_ctx=args.n_ctx,
        max_sequences=args.max_sequences,
        kv_tokens=args.kv_tokens,
        n_threads=args.n_threads,
    )

    def ready(url: str) -> None:
        print(f"embedded server ready at {url} serving {options.model_alias}", flush=True)

    try:
        asyncio.run(serve_embedded(options, args.host, args.port, ready))
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # the port is taken: the parent reads this line
        print(f"could not bind {args.host}:{args.port}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
