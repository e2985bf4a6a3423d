"""What every ``pacore`` command shares: exit codes, ``UsageError`` and the argument checks.

Also the pieces that turn resolved options into a run: the configuration,
the endpoint (the embedded model or ``--base-url``), the client, tracing and
the ``--checkpoint`` saver. Heavy modules are imported inside the functions
that need them, so importing this module (and ``pacore --help``) stays light.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacore_graph.errors import PaCoReError

if TYPE_CHECKING:
    from pydantic import ValidationError

    from pacore_graph.llm.client import ChatClient
    from pacore_graph.otel.spans import TraceOptions
    from pacore_graph.settings.config import PaCoReConfig
    from pacore_graph.settings.env_settings import PaCoReSettings
    from pacore_graph.values.records import PaCoReResult

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SKIPPED_INPUT",
    "EXIT_USAGE",
    "Endpoint",
    "UsageError",
    "check_method_settings",
    "check_writable",
    "checkpoint_saver",
    "format_validation",
    "hold_output",
    "make_client",
    "open_endpoint",
    "prepare_run",
    "readable_file",
    "resolve_settings",
    "run_summary",
    "run_tracing",
    "utf8_text",
    "writable_file",
]


#: Seconds between the lines saying the embedded model is still starting.
_STARTING_HEARTBEAT = 5.0

#: Exit statuses (documented in the package docstring, ``--help`` and the README).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SKIPPED_INPUT = 3


class UsageError(PaCoReError):
    """Bad arguments or input: exit code 2."""


def _check_base_url(url: str) -> None:
    """A base URL the clients can use, or a one-line reason why not."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"--base-url {url!r}: {exc}") from None
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--base-url must be an http(s) URL such as http://host:8000/v1; got {url!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "--base-url must not carry credentials (user:pass@); "
            "give the key with --api-key or PACORE_API_KEY"
        )


def _check_base_urls(urls: Sequence[str] | None) -> None:
    for url in urls or ():
        _check_base_url(url)
    repeated = sorted({u for u in urls or () if list(urls or ()).count(u) > 1})
    if repeated:
        raise UsageError(f"--base-url {repeated[0]} is given twice; each replica is named once")


def readable_file(path: Path, flag: str) -> None:
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{flag} {path}: not readable")


def writable_file(path: Path, flag: str) -> None:
    """Refuse, before any model call, an output file that could not be written."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {path}: not writable")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create a file in {parent}")


def check_writable(flag: str, path: Path) -> None:
    """Refuse an output path that cannot be written, before any model call is paid for."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a directory")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise UsageError(f"{flag} {path}: not writable")


def utf8_text(text: str, what: str) -> str:
    """Refuse text holding undecodable bytes (read with surrogateescape) before it is sent."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{what} is not valid UTF-8 (undecodable byte at character {exc.start + 1})"
        ) from None
    return text


def resolve_settings(args: argparse.Namespace) -> argparse.Namespace:
    """This command's arguments with its model options resolved (flag > ``PACORE_*`` > default).

    Returns a new namespace (the parser's is left as parsed): ``settings`` is
    the :class:`PaCoReSettings` and every option the command lists holds its
    resolved value, so the command code reads ``args.max_tokens`` whether it
    came from a flag or the environment.
    """
    from pydantic import ValidationError

    from pacore_graph.settings.env_settings import (
        format_settings_error,
        load_serve_settings,
        load_settings,
    )

    fields: tuple[str, ...] = getattr(args, "settings_fields", ())
    if not fields:
        return args
    served: dict[str, Any] = {}
    try:
        settings = load_settings({name: getattr(args, name) for name in fields}, only=fields)
        own: tuple[str, ...] = getattr(args, "serve_fields", ())
        if own:  # pacore serve's own flags > PACORE_SERVE_* > their rows' defaults
            server = load_serve_settings({name: getattr(args, name) for name in own})
            served = {name: getattr(server, name) for name in own}
    except ValidationError as exc:
        raise UsageError(format_settings_error(exc)) from None
    _check_base_urls(settings.base_url)  # flag or PACORE_BASE_URL: checked once, here
    resolved = {name: getattr(settings, name) for name in fields}
    # Which options were typed as flags (not read from PACORE_*): a flag is this command's
    # own, so one that would change nothing is refused (:func:`check_method_settings`).
    typed = frozenset(name for name in fields if getattr(args, name) is not None)
    return argparse.Namespace(
        **{**vars(args), **served, **resolved, "settings": settings, "flags_given": typed}
    )


#: Who reads each method family's settings, as the user names them in errors.
_FAMILY_TEXT = {
    "pacore": "PaCoRe (no --method, or pacore:...)",
    "rsa": "rsa:N,K,T",
    "deepconf": "deepconf:N",
    "deepconf-online": "deepconf-online:N",
}


def check_method_settings(
    settings: PaCoReSettings, given: Collection[str], families: Collection[str], runs: str
) -> None:
    """Refuse a method setting typed as a flag that none of the command's methods reads.

    ``families`` are the method families the command runs and ``runs`` says
    which, as typed (``--method rsa:3,2,2``); ``given`` names the settings
    typed as flags. A variable (``PACORE_RSA_FINAL``) may be set for other
    runs: it applies where it can and is ignored elsewhere. A flag would
    change nothing, which is a mistake worth one line before any model call.
    """
    from pacore_graph.settings.options import METHOD_SETTING_FAMILIES

    for name, readers in METHOD_SETTING_FAMILIES.items():
        if name in given and not set(readers) & set(families):
            flag = "--" + name.replace("_", "-")
            who = " and ".join(_FAMILY_TEXT.get(r, r) for r in readers)
            raise UsageError(f"{flag} applies to {who}, which {runs} does not run")
    if (
        "consensus_weight" in given
        and settings.consensus_weight == "confidence"
        and settings.early_stop_consensus is None
    ):
        raise UsageError(
            "--consensus-weight confidence weighs the votes of --early-stop-consensus: "
            "give --early-stop-consensus F too"
        )


def format_validation(exc: ValidationError) -> str:
    """One line naming each bad setting by its flag (the one formatter, flag labels)."""
    from pacore_graph.settings.validation import describe

    return describe(
        exc, label=lambda name: "--" + name.replace("_", "-"), prefix="invalid configuration: "
    )


@dataclass
class Endpoint:
    base_urls: list[str]
    model: str


@contextlib.asynccontextmanager
async def open_endpoint(settings: PaCoReSettings) -> AsyncIterator[Endpoint]:
    """``--base-url`` (checked when the settings were resolved), else the embedded model."""
    if settings.base_url and not settings.model:
        raise UsageError("--model is required with --base-url (the served model's name)")
    if settings.base_url:
        yield Endpoint(list(settings.base_url), settings.model)
        return
    import asyncio

    from pacore_graph.embedded import model_endpoint

    print(
        "starting the embedded model server (SmolLM2-135M-Instruct, llama.cpp)...", file=sys.stderr
    )
    started = time.perf_counter()

    async def still_starting() -> None:
        # 2-3 s on a quiet machine, 9 s and more on a loaded one: not a silent wait.
        while True:
            await asyncio.sleep(_STARTING_HEARTBEAT)
            waited = time.perf_counter() - started
            print(f"  still starting the embedded model, {waited:.0f} s", file=sys.stderr)

    async with contextlib.AsyncExitStack() as stack:
        ticker = asyncio.create_task(still_starting())
        try:
            base_url, model = await stack.enter_async_context(model_endpoint(None, None))
        finally:
            ticker.cancel()
        print(
            f"embedded server ready in {time.perf_counter() - started:.1f}s at {base_url}",
            file=sys.stderr,
        )
        yield Endpoint([base_url], model)


@contextlib.contextmanager
def run_tracing(settings: PaCoReSettings) -> Iterator[TraceOptions]:
    """Trace options for the run; flushes and shuts the exporter down at the end.

    A collector that cannot be reached costs one warning line and no wait at
    exit (:mod:`pacore_graph.otel.export_failures`), not seconds of retries.
    """
    from pacore_graph.otel.export_failures import trace_destinations, tracing_session
    from pacore_graph.otel.exporters import TracingConfigError, configure_tracing, exporter_kinds
    from pacore_graph.otel.spans import TraceOptions

    capture = True if settings.trace_content else None
    try:
        kinds = exporter_kinds(settings.trace)  # --trace, else OTEL_TRACES_EXPORTER
        project = settings.trace_project
        provider = configure_tracing(kinds, project=project) if kinds else None
    except TracingConfigError as exc:
        raise UsageError(str(exc)) from None
    if provider is None:
        yield TraceOptions(capture_content=capture)
        return
    with tracing_session(provider, trace_destinations(kinds), sys.stderr.write):
        yield TraceOptions(tracer_provider=provider, capture_content=capture)


def make_client(settings: PaCoReSettings, endpoint: Endpoint, config: PaCoReConfig) -> ChatClient:
    from pacore_graph.llm.multi_client import chat_client_for

    if settings.client == "langchain":
        from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model

        if len(endpoint.base_urls) > 1:
            raise UsageError("--client langchain takes one --base-url; use the direct client")
        chat = make_chat_model(
            endpoint.base_urls[0],
            endpoint.model,
            api_key=settings.api_key,
            sampling=config.sampling,
            retry=config.retry,
        )
        return LangChainChatClient(chat, model=endpoint.model)
    from pacore_graph.llm.session_header import parse_session_header

    try:
        session_header = parse_session_header(settings.session_header)
    except ValueError as exc:
        raise UsageError(f"--session-header (PACORE_SESSION_HEADER): {exc}") from None
    return chat_client_for(
        endpoint.base_urls,
        endpoint.model,
        api_key=settings.api_key,
        retry=config.retry,
        session_header=session_header,
    )


def run_summary(result: PaCoReResult) -> str:
    widths = "+".join(str(len(r)) for r in result.rounds)
    per_round = ", ".join(str(t) for t in result.ttc_per_round)
    return (
        f"rounds: {len(result.rounds)} ({widths})  trajectories: {len(result.trajectories)}  "
        f"failures: {result.failures}  truncated: {result.truncations}  "
        f"effective TTC: {result.effective_ttc} tokens ({per_round})  "
        f"wall: {result.wall_s:.1f}s"
    )


def prepare_run(settings: PaCoReSettings) -> tuple[PaCoReConfig, Any]:
    """Config and compactor from the resolved settings; UsageError when they are invalid."""
    from pydantic import ValidationError

    from pacore_graph.values.compaction import compactor_from_name

    try:
        config = settings.to_config(embedded=not settings.base_url)
    except ValidationError as exc:
        raise UsageError(format_validation(exc)) from None
    try:
        compactor = compactor_from_name(settings.compactor)
    except (ValueError, ImportError, AttributeError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    return config, compactor


@contextlib.asynccontextmanager
async def checkpoint_saver(
    spec: str | None, output: Path, *, eval_dir: bool = False, retry_s: float | None = None
) -> AsyncIterator[Any]:
    """The ``--checkpoint`` saver for the block; a UsageError when it cannot be opened.

    psycopg's pool logs each failed reconnection as a warning; with no
    logging configured Python prints those to stderr, several lines each,
    around the run's one-line error. They go nowhere here unless the user
    configured logging (a handler on the root logger still receives them).
    """
    import logging

    from pacore_graph.runs.checkpoint import default_checkpoint_path, open_checkpointer
    from pacore_graph.runs.store_guard import DEFAULT_STORE_RETRY_S

    if retry_s is not None and not retry_s >= 0:
        raise UsageError(f"--checkpoint-timeout must be >= 0 seconds, got {retry_s}")
    quiet = logging.getLogger("psycopg")
    if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
        quiet.addHandler(logging.NullHandler())
    default = default_checkpoint_path(output, eval_dir=eval_dir)
    wait = DEFAULT_STORE_RETRY_S if retry_s is None else retry_s
    async with contextlib.AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(open_checkpointer(spec, default, retry_s=wait))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        yield saver


@contextlib.contextmanager
def hold_output(output: Path, flag: str) -> Iterator[None]:
    """Hold ``output``'s lock for the block; a UsageError when another process holds it."""
    from pacore_graph.runs.output_lock import OutputLockedError, hold_output_lock

    try:
        with hold_output_lock(output):
            yield
    except OutputLockedError as exc:
        raise UsageError(f"{flag}: {exc}") from None
