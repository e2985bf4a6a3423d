"""The ASGI app: ``/v1/models``, ``/v1/chat/completions``, ``/v1/messages`` over the methods.

Built on FastAPI/Starlette like vLLM's OpenAI-compatible server, served by
uvicorn (see :mod:`pacore_graph.serve.server`). A PaCoRe request runs the same
compiled graph the library builds (:func:`~pacore_graph.build_pacore_graph`),
built once with the server's settings; a request's own settings (its model
name's rounds, ``temperature``, ``compactor`` ...) are that run's LangGraph
context, as for any caller of the graph. A request for another method
(``rsa:16,4,10``, ``deepconf-online:16``, ...) runs that method's graph
(:func:`~pacore_graph.eval.methods.build_method_graph`, the one ``pacore run
--method`` and ``pacore eval`` run), compiled on first use and kept
(:mod:`pacore_graph.serve.method_graphs`), with the same settings as context.
All runs share one upstream client, one limit on samples in flight, one
queue and one set of metrics. ``POST /v1/messages`` is the Anthropic Messages
API over the same runs: its body is read as the chat-completions body it
stands for (:mod:`pacore_graph.serve.messages_api`), so model names, caps,
queue, metrics and auth are one; only the answer's and errors' shapes differ
(a :class:`~pacore_graph.serve.streaming.StreamWire` per protocol).

Lifecycle rules a client can rely on:

- A client that disconnects cancels its run: the graph task is cancelled, so
  no further round (and no further upstream call) starts for it.
- Over ``max_concurrency`` runs, a request waits in a FIFO queue
  (:mod:`pacore_graph.serve.queue`) of at most ``max_queue`` requests for at
  most ``queue_timeout_s``; 429 with ``Retry-After`` only when the queue is
  full, 503 with ``Retry-After`` when the wait runs out. A client that hangs
  up while queued leaves the queue at once.
- ``GET /metrics`` is the Prometheus text (:mod:`pacore_graph.serve.metrics`).
- A model name an upstream serves (not a PaCoRe name) is relayed to it as it
  came, under the same queue and caps (:mod:`pacore_graph.serve.passthrough`).
- ``GET /stats`` reports runs in progress and, over several upstreams, each
  replica's samples, failures and health.
- On SIGTERM uvicorn stops accepting connections and waits for runs in
  flight; ``/health`` and requests still arriving on open connections get
  503 meanwhile.
- Bodies are JSON only, bounded in size, depth and read time
  (:mod:`pacore_graph.serve.guard`); what a request asks for is capped by
  the server's :class:`~pacore_graph.settings.request_limits.RequestLimits`.
- An error a client sees never quotes an upstream: no URL, no body text. A
  failed model call is named by its kind, HTTP status and upstream index
  (:meth:`~pacore_graph.errors.ModelCallError.public_message`), a failed round
  by its index; the full cause goes to the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import ModelCallError, RoundFailedError
from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.llm.complete_only import chat_client
from pacore_graph.llm.multi_client import chat_client_for
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.serve.errors import APIError, error_body_for, error_response
from pacore_graph.serve.guard import BodyGuard, decode_json
from pacore_graph.serve.messages_api import (
    MessageStreamWire,
    chat_request,
    message_body,
    message_id,
)
from pacore_graph.serve.method_graphs import MethodGraphs, progress_schedule
from pacore_graph.serve.metrics import CONTENT_TYPE, ReplicaCounts, ServeMetrics
from pacore_graph.serve.passthrough import (
    Passthrough,
    PassthroughFailed,
    PassthroughReply,
    passthrough_budget,
)
from pacore_graph.serve.protocol import (
    RunRequest,
    completion_body,
    completion_id,
    listed_models,
    parse_request,
)
from pacore_graph.serve.queue import QueueFullError, QueueTimeoutError, RunQueue
from pacore_graph.serve.settings import ServeSettings
from pacore_graph.serve.streaming import (
    ChatStreamWire,
    ProgressTranslator,
    StreamChunks,
    StreamWire,
)
from pacore_graph.settings.grammar import SERVED_MODELS, MethodSpec, is_served_name
from pacore_graph.values.records import PaCoReResult

__all__ = ["ServeState", "create_app"]

_STREAM_MODES = ["updates", "custom", "messages"]
_log = logging.getLogger("pacore_graph.serve")


class ServeState:
    """The server's shared parts: client, graphs, run queue, metrics, drain flag."""

    def __init__(self, settings: ServeSettings, client: ChatClient | None = None) -> None:
        self.settings = settings
        self.owns_client = client is None
        self.client: ChatClient = (
            chat_client(client)
            if client is not None
            else chat_client_for(
                settings.upstreams,
                settings.model,
                api_key=settings.upstream_api_key,
                retry=settings.retry,
            )
        )
        self.limiter = SequenceLimiter(settings.max_samples_in_flight)
        #: The server's own configuration: what a request's settings apply to.
        self.graph_config = settings.config()
        #: The one graph every request runs, with the request's settings as its context.
        self.graph = build_pacore_graph(
            self.client,
            config=self.graph_config,
            compactor=settings.compactor,
            limiter=self.limiter,
            compactors=settings.compactors,
            limits=settings.limits,
            tracing=settings.tracing,
        )
        #: The other served methods' graphs, over the same client, limiter and config.
        self.methods = MethodGraphs(self._build_method)
        #: Run admission: ``max_concurrency`` slots, then a bounded FIFO queue.
        self.queue = RunQueue(
            settings.max_concurrency, settings.max_queue, settings.queue_timeout_s
        )
        replica_stats = getattr(self.client, "stats", None)
        self.metrics = ServeMetrics(
            self.queue,
            (
                (lambda: [ReplicaCounts(r.samples, r.completion_tokens) for r in replica_stats()])
                if callable(replica_stats)
                else None
            ),
        )
        #: Plain upstream model names relayed as they came (None: 404 for them).
        self.passthrough = (
            Passthrough(
                settings.upstreams,
                settings.model,
                api_key=settings.upstream_api_key,
                read_timeout_s=settings.sampling.timeout,
            )
            if settings.passthrough
            else None
        )
        self.draining = False
        self.started = int(time.time())
        #: Runs started and runs cancelled by a client disconnect (for tests and logs).
        self.runs_started = 0
        self.runs_cancelled = 0

        self._cleanups: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> int:
        """Runs holding a slot now (method runs and relayed requests)."""
        return self.queue.running

    def graph_for(self, method: MethodSpec) -> Any:
        """The compiled graph a request's method runs: PaCoRe's one, or the method's own."""
        return self.graph if method.family == "pacore" else self.methods.get(method)

    def _build_method(self, spec: MethodSpec) -> Any:
        """``spec``'s graph as ``pacore run --method`` builds it, on the server's parts.

        The compactor is passed resolved, so a name the deployment registered
        works as the default; the server's ``limits`` and ``compactors`` are
        what a run's context may ask for, as for PaCoRe's graph.
        """
        from pacore_graph.eval.methods import build_method_graph  # ~0.3 s: on first use

        settings = self.settings
        return build_method_graph(
            spec,
            self.client,
            config=self.graph_config,
            compactor=settings.compactors.resolve(settings.compactor),
            limiter=self.limiter,
            tracing=settings.tracing,
            compactors=settings.compactors,
            limits=settings.limits,
        )

    async def admit(self, request: Request) -> None:
        """Take a run slot, queued in arrival order; leave the queue if the client goes."""
        if self.draining:
            raise APIError(503, "the server is shutting down; retry on another instance")
        retry_after = {"Retry-After": str(self.settings.retry_after_s)}
        acquiring = asyncio.ensure_future(self.queue.acquire())
        watch = asyncio.ensure_future(_wait_disconnect(request))
        try:
            await asyncio.wait({acquiring, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not acquiring.done():
                acquiring.cancel()  # the client went while queued: out of the queue
            await asyncio.gather(watch, acquiring, return_exceptions=True)
        if acquiring.cancelled():
            self.metrics.finished("cancelled")
            raise APIError(499, "client disconnected while queued", code="client_closed_request")
        exc = acquiring.exception()
        if isinstance(exc, QueueFullError):
            self.metrics.finished("queue_full")
            raise APIError(429, str(exc), code="queue_full", headers=retry_after)
        if isinstance(exc, QueueTimeoutError):
            self.metrics.finished("queue_timeout")
            raise APIError(503, str(exc), code="queue_timeout", headers=retry_after)
        if exc is not None:
            raise exc
        self.metrics.queue_wait.observe(acquiring.result())
        self.runs_started += 1

    def release(self) -> None:
        self.queue.release()

    def later(self, cleanup: Any) -> None:
        """Run an awaitable clean-up from a synchronous callback, keeping a reference."""
        task = asyncio.ensure_future(cleanup)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    def check_auth(self, request: Request) -> None:
        key = self.settings.api_key
        if key is None:
            return
        given = _given_key(request)
        if given is None or not hmac.compare_digest(
            given.encode("utf-8", "surrogateescape"), key.encode()
        ):
            raise APIError(
                401, "invalid or missing API key (send Authorization: Bearer KEY or x-api-key: KEY)"
            )


def _given_key(request: Request) -> str | None:
    """The key a request sends: ``Authorization: Bearer KEY``, else Anthropic's ``x-api-key``."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return token.strip()
    key = request.headers.get("x-api-key")
    return key.strip() if key is not None else None


class _DisconnectAwareStream(StreamingResponse):
    """A streaming response that notices a client leaving even while silent.

    Starlette only listens for ``http.disconnect`` under older ASGI spec
    versions; here it always does, so a run whose rounds produce no output for
    a while is still cancelled as soon as its client goes. ``on_close`` runs
    however the response ends.
    """

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            streaming = asyncio.ensure_future(self.stream_response(send))
            listening = asyncio.ensure_future(self.listen_for_disconnect(receive))
            try:
                await asyncio.wait({streaming, listening}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (streaming, listening):
                    task.cancel()
                results = await asyncio.gather(streaming, listening, return_exceptions=True)
            error = results[0]
            if isinstance(error, Exception) and not isinstance(error, OSError):
                raise error
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            self._on_close()


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _run_error(exc: BaseException) -> APIError:
    """What the client is told about a failed run: never upstream URLs or body text.

    The full message (which may name the upstream and quote its answer) goes
    to the server's log, one line, for the operator.
    """
    _log.warning("run failed: %s: %s", type(exc).__name__, str(exc).replace("\n", " ")[:2000])
    if isinstance(exc, RoundFailedError):
        return APIError(502, exc.public_message(), code="upstream_error")
    if isinstance(exc, ModelCallError):
        return APIError(502, exc.public_message(), code="upstream_error")
    return APIError(500, f"internal error ({type(exc).__name__})", code="internal_error")


def create_app(settings: ServeSettings, *, client: ChatClient | None = None) -> FastAPI:
    """The server's ASGI app. ``client`` replaces the upstream client (tests, custom clients)."""
    state = ServeState(settings, client)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            state.draining = True
            if state.owns_client:
                await state.client.aclose()
            if state.passthrough is not None:
                await state.passthrough.aclose()
            provider = settings.tracing.tracer_provider if settings.tracing else None
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                # uvicorn re-raises SIGTERM once the app has shut down, so the
                # process may end before any code after serve() runs: export now.
                await asyncio.to_thread(flush)

    app = FastAPI(title="pacore serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.pacore = state
    app.add_middleware(
        BodyGuard,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_s=settings.body_timeout_s,
    )

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> Response:
        return error_response(exc, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        body, status = error_body_for(request.url.path, exc.status_code, str(exc.detail))
        return JSONResponse(body, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        body, status = error_body_for(request.url.path, 400, str(exc.errors()[:1]))
        return JSONResponse(body, status_code=status)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=503 if state.draining else 200)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        state.check_auth(request)
        names = dict.fromkeys(SERVED_MODELS)
        if state.passthrough is not None:
            names.update(dict.fromkeys(await state.passthrough.models()))
        return JSONResponse(listed_models(state.started, list(names)))

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        """Prometheus text: queue, runs, replicas, upstream errors (names in docs/serve.md)."""
        state.check_auth(request)
        return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get("/stats")
    async def stats(request: Request) -> Response:
        """Runs and, over several upstreams, each replica's counters (for operators)."""
        state.check_auth(request)
        replica_stats = getattr(state.client, "stats", None)
        replicas = [asdict(r) for r in replica_stats()] if callable(replica_stats) else []
        return JSONResponse(
            {
                "runs_in_progress": state.active,
                "runs_queued": state.queue.queued,
                "runs_started": state.runs_started,
                "runs_cancelled": state.runs_cancelled,
                "draining": state.draining,
                "replicas": replicas,
            }
        )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        state.check_auth(request)
        raw = await request.body()  # bounded and timed by BodyGuard
        body = decode_json(raw, max_depth=settings.max_json_depth)
        if await _relayed(state, body):
            return await _passthrough(state, request, body, raw)
        run = parse_request(
            body,
            defaults=state.graph_config,
            limits=settings.limits,
            compactors=settings.compactors,
        )
        try:
            graph = state.graph_for(run.method)
        except ValueError as exc:  # a spec the grammar passed but its builder refused
            raise APIError(400, f"'model': {exc}", param="model") from None
        chunks = StreamChunks(id=completion_id(), model=run.model)
        wire = ChatStreamWire(chunks, include_usage=run.include_usage)
        return await _answer(
            state, request, graph, run, wire, lambda r: completion_body(run, r, id_=chunks.id)
        )

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        """Anthropic's Messages API over the same runs (:mod:`~pacore_graph.serve.messages_api`)."""
        state.check_auth(request)
        body = decode_json(await request.body(), max_depth=settings.max_json_depth)
        chat, shown = chat_request(body)
        run = parse_request(
            chat,
            defaults=state.graph_config,
            limits=settings.limits,
            compactors=settings.compactors,
        )
        try:
            graph = state.graph_for(run.method)
        except ValueError as exc:
            raise APIError(400, f"'model': {exc}", param="model") from None
        wire = MessageStreamWire(message_id(), run.model, thinking=shown)
        return await _answer(
            state, request, graph, run, wire, lambda r: message_body(run, r, wire.id, shown)
        )

    return app


async def _answer(
    state: ServeState,
    request: Request,
    graph: Any,
    run: RunRequest,
    wire: StreamWire,
    render: Callable[[PaCoReResult], dict[str, Any]],
) -> Response:
    """Admit the run, then stream it in ``wire``'s events or answer ``render(result)``."""
    await state.admit(request)
    inputs = {"messages": list(run.messages)}
    if run.stream:
        return _DisconnectAwareStream(_stream(state, graph, run, inputs, wire), state.release)
    started = time.monotonic()
    outcome = "failed"
    try:
        result = await _complete(state, request, graph, run, inputs)
        outcome = "ok"
        return JSONResponse(render(result))
    except APIError as exc:
        outcome = "cancelled" if exc.status == 499 else "failed"
        raise
    finally:
        state.release()
        ran = time.monotonic() - started
        state.metrics.finished(outcome, None if outcome == "cancelled" else ran)


async def _complete(
    state: ServeState, request: Request, graph: Any, run: RunRequest, inputs: dict[str, Any]
) -> PaCoReResult:
    """Run to the end, or cancel the run when the client goes away first."""
    task = asyncio.ensure_future(graph.ainvoke(inputs, context=dict(run.settings)))
    watch = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
            state.runs_cancelled += 1
        await asyncio.gather(watch, task, return_exceptions=True)
    if task.cancelled():
        # Nobody is listening; this answer is never read.
        raise APIError(499, "client disconnected", code="client_closed_request")
    exc = task.exception()
    if exc is not None:
        state.metrics.failure(exc)
        raise _run_error(exc)
    result: PaCoReResult = task.result()["result"]
    state.metrics.result(result)
    return result


async def _stream(
    state: ServeState, graph: Any, run: RunRequest, inputs: dict[str, Any], wire: StreamWire
) -> AsyncIterator[bytes]:
    """The SSE body in ``wire``'s protocol: progress as reasoning, then the answer and usage."""
    schedule, synthesis = progress_schedule(run.method)
    if run.method.family == "pacore":
        schedule = (*run.rounds, 1)  # a body's rounds replace the model name's
    translator = ProgressTranslator(schedule=schedule, synthesis=synthesis)
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def pump() -> None:
        try:
            stream = graph.astream(inputs, stream_mode=_STREAM_MODES, context=dict(run.settings))
            async for mode, payload in stream:
                queue.put_nowait(("item", (mode, payload)))
            queue.put_nowait(("end", None))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            queue.put_nowait(("error", exc))

    task = asyncio.ensure_future(pump())
    finished = False
    outcome = "failed"
    started = time.monotonic()
    try:
        for out in wire.opening():
            yield out
        while True:
            kind, payload = await queue.get()
            if kind == "item":
                for delta in translator.feed(*payload):
                    for out in wire.delta(delta):
                        yield out
                continue
            if kind == "error":
                state.metrics.failure(payload)
                err = _run_error(payload)
                for out in wire.failure(err.status, err.message, err.code):
                    yield out
                finished = True
                return
            break
        result = translator.result
        if result is None:
            for out in wire.failure(500, "the run ended without a result", "internal_error"):
                yield out
            finished = True
            return
        state.metrics.result(result)
        outcome = "ok"
        for delta in translator.finish():
            for out in wire.delta(delta):
                yield out
        for out in wire.closing(result, translator.streamed_content):
            yield out
        finished = True
    finally:
        if not task.done():
            task.cancel()
            if not finished:
                state.runs_cancelled += 1
        await asyncio.gather(task, return_exceptions=True)
        if not finished:
            state.metrics.finished("cancelled")
        else:
            state.metrics.finished(outcome, time.monotonic() - started)


async def _relayed(state: ServeState, body: Any) -> bool:
    """Whether the request names a plain model an upstream serves (not a served method's name).

    A name in the methods' grammar (``rsa:0,1,1`` too) is never relayed: it
    is answered here, or refused without asking any upstream.
    """
    if state.passthrough is None or not isinstance(body, dict):
        return False
    model = body.get("model")
    if not isinstance(model, str) or not model or is_served_name(model):
        return False
    return await state.passthrough.serves(model)


async def _passthrough(
    state: ServeState, request: Request, body: dict[str, Any], raw: bytes
) -> Response:
    """Relay the body to an upstream under the run queue and the sample budget."""
    assert state.passthrough is not None
    n = passthrough_budget(body, state.settings.limits)
    stream = body.get("stream") is True
    await state.admit(request)
    started = time.monotonic()
    budget = contextlib.AsyncExitStack()
    handed_on = False
    try:
        await budget.enter_async_context(state.limiter.hold(n))
        try:
            reply = await state.passthrough.forward(raw, stream=stream)
        except PassthroughFailed as exc:
            state.metrics.passthrough.labels(str(exc.upstream), "error").inc()
            state.metrics.upstream_errors.labels(exc.kind).inc()
            raise
        state.metrics.passthrough.labels(str(reply.upstream), str(reply.status)).inc()
        if reply.status >= 400:
            kind = "status" if reply.status >= 500 or reply.status == 429 else None
            if kind is not None:
                state.metrics.upstream_errors.labels(kind).inc()
            raise APIError(
                reply.status,
                f"upstream #{reply.upstream} answered HTTP {reply.status}",
                code="upstream_error",
            )
        if reply.stream is None:
            state.metrics.finished("ok", time.monotonic() - started)
            return Response(reply.body, status_code=reply.status, media_type=reply.content_type)
        handed_on = True
        return _DisconnectAwareStream(
            _relay(state, reply, started), lambda: _relay_closed(state, reply, budget)
        )
    except APIError as exc:
        if exc.status != 499:
            state.metrics.finished("failed", time.monotonic() - started)
        raise
    finally:
        if not handed_on:
            await budget.aclose()
            state.release()


async def _relay(
    state: ServeState, reply: PassthroughReply, started: float
) -> AsyncIterator[bytes]:
    """The upstream's stream, chunk by chunk as it arrives.

    A stream whose ``data: [DONE]`` went out counts as answered even if the
    client hangs up before the upstream ends it (the ``openai`` SDK does).
    """
    finished = False
    try:
        async for chunk in reply.chunks():
            yield chunk
            finished = finished or chunk.rstrip().endswith(b"data: [DONE]")
        finished = True
    finally:
        if finished:
            state.metrics.finished("ok", time.monotonic() - started)
        else:
            state.metrics.finished("cancelled")


def _relay_closed(
    state: ServeState, reply: PassthroughReply, budget: contextlib.AsyncExitStack
) -> None:
    """A relayed stream ended however it did: the upstream response, its room and slot go back."""
    reply.close()  # also when the relay never started (the client left at once)
    state.later(budget.aclose())
    state.release()
