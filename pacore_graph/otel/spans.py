"""OpenTelemetry spans of a PaCoRe run, following the GenAI semantic conventions.

(Where spans *go* is set up in :mod:`pacore_graph.otel.exporters`; attribute
names and the provider rule are in :mod:`pacore_graph.values.conventions`.)

Written against the OpenTelemetry *API*: with no SDK provider configured every
call is a no-op, and a run that is not being recorded stops making spans
after its first one, so tracing that nobody collects costs one span per run.

The tree of one run::

    invoke_workflow pacore                 (run id, preset, K vector, answer size, TTC)
    ├── pacore.round 0                     (K, input messages and size, failures)
    │   ├── chat {model}  x K              (GenAI request/usage/finish attributes)
    │   └── pacore.compact conclusion      (sizes before and after)
    ├── pacore.round 1
    │   ├── chat {model}  --links-->  the round-0 chat spans whose messages it read
    │   ...

Message passing is drawn with span *links*: every explorer span of round r+1
links to the explorer spans of round r whose messages were in its prompt, with
the reference's position (1-based, as in the prompt) as a link attribute.
Backends that store no links (Arize Phoenix) still show it: the same
references are the explorer span's ``pacore.references`` attribute, a JSON
list of ``{"position", "round", "index", "span_id"}`` (the span id in hex, as
backends print it).

Every span says what it is twice: as a GenAI operation
(``gen_ai.operation.name``, for backends that read the OpenTelemetry
conventions) and as an OpenInference kind (:mod:`pacore_graph.otel.openinference`,
which Phoenix and Langfuse read first)::

    span                      gen_ai.operation.name   openinference.span.kind
    invoke_workflow pacore    invoke_workflow         AGENT
    pacore.round r            invoke_workflow         CHAIN
    chat {model}              chat                    LLM
    invoke_agent {name}       invoke_agent            AGENT   (a graph explorer)
    execute_tool {name}       execute_tool            TOOL
    pacore.compact {name}     (none)                  CHAIN

The run and each round are workflows in the GenAI sense (they group several
model or agent invocations: ``gen_ai.workflow.name`` ``pacore`` and
``pacore.round``); OpenInference has no workflow kind, so they name the
nearest one itself. A compaction calls no model, runs no tool the model
chose and invokes no agent: no GenAI operation fits, and it has none.
Phoenix derives a kind from ``invoke_agent``, ``chat`` and ``execute_tool``
but shows ``invoke_workflow`` and a span without an operation as unknown,
which is why the kind is always set. The run's root span carries
the question and the answer as ``input.value`` / ``output.value`` (only with
content capture; their sizes otherwise), which is what a backend's trace list
shows. ``error.type`` is low-cardinality (:func:`~pacore_graph.values.conventions.error_type`:
the HTTP status, the error's kind or the exception class).
``gen_ai.conversation.id`` is the run id on every span, so Langfuse groups a
run as one session. A chat span also says where the call went
(``server.address``/``server.port``), who serves the model
(``gen_ai.provider.name``, see :func:`~pacore_graph.values.conventions.provider_name`),
the sample's seed (``gen_ai.request.seed``, see :mod:`pacore_graph.values.seeds`)
and the model that answered
(``gen_ai.response.model``); the explorer reports the request and the response
with :func:`record_chat_request` and :func:`record_chat_response`. Prompt and
completion text are recorded only when asked (``capture_content=True`` or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from pacore_graph.otel import openinference as oi
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.values import conventions as semconv
from pacore_graph.values.records import PaCoReResult, Trajectory

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTATION_NAME",
    "ROUND_WORKFLOW",
    "RUN_WORKFLOW",
    "RunTracer",
    "TraceOptions",
    "capture_content_from_env",
    "model_step_span",
    "record_call_error",
    "record_chat_request",
    "record_chat_response",
    "tool_span",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
INSTRUMENTATION_NAME = "pacore_graph"
RUN_WORKFLOW = "pacore"
"""``gen_ai.workflow.name`` of the run's root span (``invoke_workflow pacore``)."""
ROUND_WORKFLOW = "pacore.round"
"""``gen_ai.workflow.name`` of every round span: one name for all rounds (the
conventions want it low-cardinality; the index is ``pacore.round.index``)."""


def _version() -> str:
    # Imported late: pacore_graph/__init__.py imports the graph, which imports this.
    from pacore_graph import __version__

    return __version__


@dataclass(slots=True)
class _CallOutcome:
    """What an explorer reported about its call while its span was open."""

    error_type: str | None = None


@dataclass(frozen=True, slots=True)
class _Active:
    tracer: Tracer
    capture: bool
    model: str | None
    provider: str
    conversation_id: str
    declared_provider: str | None = None
    outcome: _CallOutcome = field(default_factory=_CallOutcome)
    params: SamplingParams | None = None
    """What the explorer's round sends: a model step's span says it too."""


#: The tracer of the explorer span in progress, so spans made deeper down (a
#: tool explorer's tool calls and model steps, in a subgraph) go to the same
#: provider as the run's, not to the global one. Context variables follow
#: asyncio tasks, which is how LangGraph runs subgraph nodes.
_ACTIVE: ContextVar[_Active | None] = ContextVar("pacore_active_tracer", default=None)


@contextmanager
def tool_span(name: str, arguments: Mapping[str, Any]) -> Iterator[Span | None]:
    """An ``execute_tool {name}`` span under the current explorer span (None if not tracing)."""
    active = _ACTIVE.get()
    if active is None:
        yield None
        return
    attrs: dict[str, Any] = {
        oi.SPAN_KIND: oi.TOOL,
        semconv.GEN_AI_OPERATION_NAME: semconv.EXECUTE_TOOL,
        semconv.GEN_AI_TOOL_NAME: name,
        semconv.GEN_AI_CONVERSATION_ID: active.conversation_id,
    }
    if active.capture:
        attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = json.dumps(dict(arguments), default=str)
    with active.tracer.start_as_current_span(
        f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attrs
    ) as span:
        yield span


@contextmanager
def model_step_span(
    model: str | None = None, messages_json: str | None = None
) -> Iterator[Span | None]:
    """A ``chat {model}`` span for one model call inside a multi-step explorer.

    A call that raises leaves the span with an error status and the
    exception recorded (the SDK does that) and, like a plain explorer's
    chat span, a low-cardinality ``error.type``
    (:func:`~pacore_graph.values.conventions.error_type`: the HTTP status, the
    error's kind or its class). The exception goes on to the caller, which
    decides whether it fails the trajectory (and then passes it to
    :func:`record_call_error` for the explorer's own span).
    """
    active = _ACTIVE.get()
    if active is None:
        yield None
        return
    params = active.params
    model = model or (params.model if params is not None else None) or active.model or "model"
    attrs: dict[str, Any] = {
        oi.SPAN_KIND: oi.LLM,
        semconv.GEN_AI_OPERATION_NAME: semconv.CHAT,
        semconv.GEN_AI_PROVIDER_NAME: active.provider,
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.GEN_AI_CONVERSATION_ID: active.conversation_id,
    }
    if params is not None:
        attrs[semconv.GEN_AI_REQUEST_TEMPERATURE] = params.temperature
        attrs[semconv.GEN_AI_REQUEST_TOP_P] = params.top_p
        if params.max_tokens is not None:
            attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] = params.max_tokens
    if active.capture and messages_json is not None:
        attrs[semconv.GEN_AI_INPUT_MESSAGES] = messages_json
    with active.tracer.start_as_current_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes=attrs
    ) as span:
        try:
            yield span
        except Exception as exc:
            span.set_attribute(semconv.ERROR_TYPE, semconv.error_type(exc))
            raise


def _client_urls(client: Any) -> list[str]:
    """The base URL(s) a client sends to: ``base_url``, or ``base_urls`` of a replica set."""
    one = getattr(client, "base_url", None)
    if isinstance(one, str):
        return [one]
    many = getattr(client, "base_urls", None)
    if isinstance(many, list | tuple):
        return [u for u in many if isinstance(u, str)]
    return []


def record_chat_request(client: Any, *, seed: int | None = None) -> None:
    """Put where a chat call goes on the current explorer span: server, provider, seed.

    Called by an explorer just before it sends the request, with the client
    it sends it through (its ``base_url`` gives ``server.address`` and
    ``server.port``, and its optional ``provider_name`` names the server)
    and this sample's seed (a batched request carries its first sample's).
    A client spreading calls over several
    replicas (``base_urls``) gets a provider when they all agree, and no
    server address, since the span cannot know which replica answered.
    Does nothing outside a recorded explorer span.
    """
    active = _ACTIVE.get()
    span = trace.get_current_span()
    if active is None or not span.is_recording():
        return
    urls = _client_urls(client)
    declared = active.declared_provider or getattr(client, "provider_name", None)
    declared = declared if isinstance(declared, str) else None
    targets: list[str | None] = [*urls] if urls else [None]
    providers = {semconv.provider_name(url, declared=declared) for url in targets}
    provider = providers.pop() if len(providers) == 1 else semconv.OPENAI_COMPATIBLE
    attrs: dict[str, Any] = {semconv.GEN_AI_PROVIDER_NAME: provider}
    address = semconv.server_address_and_port(urls[0]) if len(urls) == 1 else None
    if address is not None:
        attrs[semconv.SERVER_ADDRESS], attrs[semconv.SERVER_PORT] = address
    if seed is not None:
        attrs[semconv.GEN_AI_REQUEST_SEED] = seed
    span.set_attributes(attrs)


def record_chat_response(model: str | None) -> None:
    """Put the model that answered (``gen_ai.response.model``) on the current explorer span."""
    if _ACTIVE.get() is None or not model:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(semconv.GEN_AI_RESPONSE_MODEL, model)


def record_call_error(error: BaseException) -> None:
    """Say why the current explorer's call failed, for its span's ``error.type``.

    A failed trajectory keeps only its error's text; an explorer that still
    holds the exception calls this before recording the failure, so the span
    gets the exception's status or kind (``"timeout"``, ``"transport"``, ...)
    where the text would give only ``_OTHER``. Does nothing outside a recorded
    explorer span.
    """
    active = _ACTIVE.get()
    if active is not None:
        active.outcome.error_type = semconv.error_type(error)


def capture_content_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """The GenAI conventions' opt-in switch for recording message content."""
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceOptions:
    """How a graph traces. ``tracer_provider=None`` uses the global one (set by the user).

    ``enabled=False`` makes no span calls at all; ``capture_content=None`` reads
    the environment variable of the GenAI conventions. ``provider_name``
    names the server for ``gen_ai.provider.name`` (e.g. ``"vllm"``); ``None``
    infers it from the client's base URL
    (:func:`~pacore_graph.values.conventions.provider_name`).
    """

    enabled: bool = True
    tracer_provider: Any = None
    capture_content: bool | None = None
    provider_name: str | None = None


def _settings_json(params: SamplingParams, model: str | None) -> dict[str, Any]:
    return {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
        "model": params.model or model,
    }


def _messages_json(messages: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(
        [
            {"role": m.get("role"), "parts": [{"type": "text", "content": m.get("content")}]}
            for m in messages
        ],
        ensure_ascii=False,
    )


def _input_value(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The run's ``input.value`` and its MIME type: the question, or the whole conversation.

    One user message is shown as its text (what a trace list should show);
    a longer conversation (a system prompt, earlier turns) as JSON.
    """
    if len(messages) == 1 and isinstance(messages[0].get("content"), str):
        return str(messages[0]["content"]), oi.TEXT_MIME
    return (
        json.dumps(
            [{"role": m.get("role"), "content": m.get("content")} for m in messages],
            ensure_ascii=False,
            default=str,
        ),
        oi.JSON_MIME,
    )


def _chars(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(c) if isinstance(c := m.get("content"), str) else 0 for m in messages)


def _output_json(t: Trajectory) -> str:
    parts: list[dict[str, Any]] = []
    if t.reasoning:
        parts.append({"type": "reasoning", "content": t.reasoning})
    parts.append({"type": "text", "content": t.content})
    return json.dumps(
        [{"role": "assistant", "parts": parts, "finish_reason": t.finish_reason}],
        ensure_ascii=False,
    )


def _references_json(
    round_index: int, references: Sequence[int], spans: Mapping[int, SpanContext]
) -> str:
    """``pacore.references``: each reference read, in prompt order, with its span when traced."""
    return json.dumps(
        [
            {
                "position": position,
                "round": round_index,
                "index": ref,
                "span_id": format(spans[ref].span_id, "016x") if ref in spans else None,
            }
            for position, ref in enumerate(references, start=1)
        ]
    )


@dataclass(slots=True)
class _RunState:
    span: Span
    recording: bool
    round_span: Span | None = None
    round_index: int = 0
    input_recorded: bool = False
    # Span contexts of the previous and current round's explorers, by index.
    previous: dict[int, SpanContext] = field(default_factory=dict)
    current: dict[int, SpanContext] = field(default_factory=dict)


class RunTracer:
    """Span bookkeeping for every run of one compiled graph.

    LangGraph nodes of one run execute as separate tasks, so the run and round
    spans live here between nodes, keyed by run id, and end when the run ends
    or fails.
    """

    def __init__(self, options: TraceOptions, *, config: PaCoReConfig, model: str | None) -> None:
        self.options = options
        self.model = model
        """The client's model, when the graph has one (a custom explorer may bring its own)."""
        self.config = config
        self.capture = (
            options.capture_content
            if options.capture_content is not None
            else capture_content_from_env()
        )
        self._tracer: Tracer | None = (
            trace.get_tracer(
                INSTRUMENTATION_NAME,
                _version(),
                tracer_provider=options.tracer_provider,
                schema_url=semconv.SCHEMA_URL,
            )
            if options.enabled
            else None
        )
        self._runs: dict[str, _RunState] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ run
    def start_run(
        self,
        run_id: str,
        schedule: Sequence[int],
        preset: str | None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        config: PaCoReConfig | None = None,
    ) -> None:
        """Open the run's root span; ``messages`` (the problem) become its input.

        ``config`` is the run's own (the graph's with its context applied):
        the span says the rounds and sampling the run used. Without
        ``messages`` the input is taken from the first explorer of round 0,
        whose prompt is the problem as it was given.
        """
        if self._tracer is None:
            return
        cfg = config if config is not None else self.config
        sampling = cfg.sampling
        attrs: dict[str, Any] = {
            # The whole run is one GenAI workflow; OpenInference has no
            # workflow kind, and AGENT (LLM and tool calls under one root)
            # is what Phoenix lists as a run.
            oi.SPAN_KIND: oi.AGENT,
            semconv.GEN_AI_OPERATION_NAME: semconv.INVOKE_WORKFLOW,
            semconv.GEN_AI_WORKFLOW_NAME: RUN_WORKFLOW,
            semconv.GEN_AI_CONVERSATION_ID: run_id,
            semconv.GEN_AI_REQUEST_TEMPERATURE: sampling.temperature,
            semconv.GEN_AI_REQUEST_TOP_P: sampling.top_p,
            "pacore.run_id": run_id,
            "pacore.preset": preset or "custom",
            "pacore.rounds": list(cfg.widths),
            "pacore.schedule": list(schedule),
        }
        model = sampling.model or self.model
        if model:
            attrs[semconv.GEN_AI_REQUEST_MODEL] = model
        if sampling.max_tokens is not None:
            attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] = sampling.max_tokens
        if sampling.seed is not None:
            attrs[semconv.GEN_AI_REQUEST_SEED] = sampling.seed
        if cfg.has_round_settings:
            attrs["pacore.round_settings"] = json.dumps(
                [
                    {"k": k, **_settings_json(cfg.round_sampling(i), self.model)}
                    for i, k in enumerate((*cfg.widths, 1))
                ]
            )
        span = self._tracer.start_span(
            f"{semconv.INVOKE_WORKFLOW} {RUN_WORKFLOW}", kind=SpanKind.INTERNAL, attributes=attrs
        )
        state = _RunState(span=span, recording=span.is_recording())
        with self._lock:
            self._runs[run_id] = state
        if messages is not None and state.recording:
            self._record_input(state, messages)

    def _record_input(self, state: _RunState, messages: Sequence[Mapping[str, Any]]) -> None:
        """The problem on the root span: its text with content capture, its size without."""
        state.input_recorded = True
        attrs: dict[str, Any] = {
            "pacore.input.messages": len(messages),
            "pacore.input.chars": _chars(messages),
        }
        if self.capture:
            attrs[oi.INPUT_VALUE], attrs[oi.INPUT_MIME_TYPE] = _input_value(messages)
        state.span.set_attributes(attrs)

    def _state(self, run_id: str) -> _RunState | None:
        state = self._runs.get(run_id)
        return state if state is not None and state.recording else None

    def end_run(self, run_id: str, result: PaCoReResult) -> None:
        with self._lock:
            state = self._runs.pop(run_id, None)
        if state is None:
            return
        if state.recording:
            if self.capture:
                state.span.set_attributes(
                    {oi.OUTPUT_VALUE: result.answer, oi.OUTPUT_MIME_TYPE: oi.TEXT_MIME}
                )
            state.span.set_attributes(
                {
                    "pacore.answer.length": len(result.answer),
                    "pacore.effective_ttc": result.effective_ttc,
                    "pacore.ttc_per_round": list(result.ttc_per_round),
                    "pacore.trajectories": len(result.trajectories),
                    "pacore.failures": result.failures,
                    "pacore.truncations": result.truncations,
                    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: result.effective_ttc,
                }
            )
        state.span.end()

    def context_of(self, run_id: str) -> tuple[str, str] | None:
        """The run's root span as hex ``(trace_id, span_id)``, kept in the run's state so a
        resumed run stays in its trace (None when the run is not traced)."""
        state = self._state(run_id)
        if state is None:
            return None
        ctx = state.span.get_span_context()
        return (format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"))

    def resume(
        self, run_id: str, parent: Sequence[str] | None, round_index: int | None = None
    ) -> None:
        """Open spans for a run that goes on in this process without them.

        A thread resumed after a pause (``interrupt()``), after a failed
        round or in another process has no open spans here: a root span
        (``pacore.resumed``) is opened as a child of the run's first root,
        ``parent`` (:meth:`context_of`), so everything the resumed run does is
        in the run's trace; and a round span for ``round_index`` when that
        round has none. Nothing happens for a run whose spans are open, or
        that is not traced. ``round_index`` None opens the root only (the round
        node opens its round).
        """
        if self._tracer is None or parent is None:
            return
        with self._lock:
            state = self._runs.get(run_id)
        if state is None:
            trace_id, span_id = int(parent[0], 16), int(parent[1], 16)
            first = SpanContext(
                trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
            )
            span = self._tracer.start_span(
                f"{semconv.INVOKE_WORKFLOW} {RUN_WORKFLOW}",
                context=trace.set_span_in_context(NonRecordingSpan(first)),
                kind=SpanKind.INTERNAL,
                attributes={
                    oi.SPAN_KIND: oi.AGENT,
                    semconv.GEN_AI_OPERATION_NAME: semconv.INVOKE_WORKFLOW,
                    semconv.GEN_AI_WORKFLOW_NAME: RUN_WORKFLOW,
                    semconv.GEN_AI_CONVERSATION_ID: run_id,
                    "pacore.run_id": run_id,
                    "pacore.resumed": True,
                },
            )
            state = _RunState(span=span, recording=span.is_recording(), input_recorded=True)
            with self._lock:
                self._runs[run_id] = state
        if round_index is None or not state.recording:
            return
        if state.round_span is None or state.round_index != round_index:
            if state.round_span is not None:
                state.round_span.end()
            self._open_round(state, run_id, round_index, {"pacore.resumed": True})

    def pause_run(self, run_id: str | None) -> None:
        """End the run's open spans as paused, not failed (LangGraph's ``interrupt()``).

        The resumed run opens new spans in the same trace (:meth:`resume`).
        """
        for span in self._pop_open_spans(run_id):
            span.set_attribute("pacore.paused", True)
            span.end()

    def fail_run(self, run_id: str | None, exc: BaseException) -> None:
        """End the run's open spans with an error status (called when any node raises)."""
        for span in self._pop_open_spans(run_id):
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            span.end()

    def _pop_open_spans(self, run_id: str | None) -> list[Span]:
        """The run's open round and root spans (innermost first), forgotten by the tracer."""
        if run_id is None:
            return []
        with self._lock:
            state = self._runs.pop(run_id, None)
        if state is None:
            return []
        return [span for span in (state.round_span, state.span) if span is not None]

    # ---------------------------------------------------------------- round
    def start_round(self, run_id: str, index: int, width: int, references: Sequence[str]) -> None:
        state = self._state(run_id)
        if state is None or self._tracer is None:
            return
        self._open_round(
            state,
            run_id,
            index,
            {
                "pacore.round.k": width,
                "pacore.round.input_messages": len(references),
                "pacore.round.input_chars": sum(len(r) for r in references),
            },
        )

    def _open_round(
        self, state: _RunState, run_id: str, index: int, extra: Mapping[str, Any]
    ) -> None:
        """Round ``index``'s span under the run's, with ``extra`` attributes; the last round's
        explorer spans become the ones this round's references link to."""
        assert self._tracer is not None
        state.round_span = self._tracer.start_span(
            f"pacore.round {index}",
            context=trace.set_span_in_context(state.span),
            attributes={
                # A sub-workflow grouping the round's K explorer calls (GenAI
                # invoke_workflow); OpenInference has no workflow kind, and
                # Phoenix shows invoke_workflow as unknown, so CHAIN is named.
                oi.SPAN_KIND: oi.CHAIN,
                semconv.GEN_AI_OPERATION_NAME: semconv.INVOKE_WORKFLOW,
                semconv.GEN_AI_WORKFLOW_NAME: ROUND_WORKFLOW,
                semconv.GEN_AI_CONVERSATION_ID: run_id,
                "pacore.round.index": index,
                **extra,
            },
        )
        state.round_index = index
        state.previous, state.current = state.current, {}

    def end_round(self, run_id: str, trajectories: Sequence[Trajectory]) -> None:
        state = self._state(run_id)
        if state is None or state.round_span is None:
            return
        failures = sum(t.failed for t in trajectories)
        state.round_span.set_attributes(
            {
                "pacore.round.failures": failures,
                "pacore.round.output_tokens": sum(t.completion_tokens for t in trajectories),
                "pacore.round.truncations": sum(t.truncated for t in trajectories),
            }
        )
        if failures == len(trajectories):
            state.round_span.set_status(Status(StatusCode.ERROR, "every explorer call failed"))
        state.round_span.end()
        state.round_span = None

    # ------------------------------------------------------------- explorer
    @contextmanager
    def explorer(
        self,
        run_id: str,
        index: int,
        references: Sequence[int],
        messages: Sequence[Mapping[str, Any]],
        name: str | None = None,
        params: SamplingParams | None = None,
    ) -> Iterator[_ExplorerSpan]:
        """A ``chat {model}`` span (or ``invoke_agent`` for a graph explorer).

        ``params`` is what the explorer's round sends (the run's sampling with
        the round's own settings); its model, else the client's, names the span.
        """
        state = self._state(run_id)
        if state is None or state.round_span is None or self._tracer is None:
            yield _ExplorerSpan(None, self, _CallOutcome())
            return
        if not state.input_recorded and state.round_index == 0:
            self._record_input(state, messages)
        links = [
            Link(
                state.previous[ref],
                {"pacore.reference.position": pos, "pacore.reference.index": ref},
            )
            for pos, ref in enumerate(references, start=1)
            if ref in state.previous
        ]
        sampling = params if params is not None else self.config.sampling
        model = sampling.model or self.model
        attrs: dict[str, Any] = {
            oi.SPAN_KIND: oi.LLM if name is None else oi.AGENT,
            semconv.GEN_AI_OPERATION_NAME: semconv.CHAT if name is None else semconv.INVOKE_AGENT,
            semconv.GEN_AI_REQUEST_TEMPERATURE: sampling.temperature,
            semconv.GEN_AI_REQUEST_TOP_P: sampling.top_p,
            semconv.GEN_AI_CONVERSATION_ID: run_id,
            "pacore.explorer.index": index,
            "pacore.round.index": state.round_index,
        }
        if references:
            attrs["pacore.references"] = _references_json(
                state.round_index - 1, references, state.previous
            )
        if self.options.provider_name:
            # Known up front; otherwise the explorer reports it with the request.
            attrs[semconv.GEN_AI_PROVIDER_NAME] = self.options.provider_name
        if sampling.max_tokens is not None:
            attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] = sampling.max_tokens
        if model:
            attrs[semconv.GEN_AI_REQUEST_MODEL] = model
        if name is not None:
            attrs[semconv.GEN_AI_AGENT_NAME] = name
        if self.capture:
            attrs[semconv.GEN_AI_INPUT_MESSAGES] = _messages_json(messages)
        span = self._tracer.start_span(
            f"chat {model or 'model'}" if name is None else f"invoke_agent {name}",
            context=trace.set_span_in_context(state.round_span),
            kind=SpanKind.CLIENT if name is None else SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
        )
        state.current[index] = span.get_span_context()
        outcome = _CallOutcome()
        token = _ACTIVE.set(
            _Active(
                self._tracer,
                self.capture,
                model,
                self.options.provider_name or semconv.OPENAI_COMPATIBLE,
                run_id,
                self.options.provider_name,
                outcome,
                sampling,
            )
        )
        handle = _ExplorerSpan(span, self, outcome)
        try:
            with trace.use_span(
                span, end_on_exit=True, record_exception=False, set_status_on_exception=False
            ):
                try:
                    yield handle
                except BaseException as exc:
                    if not handle.paused:  # an interrupt is a pause, not an error
                        span.record_exception(exc)
                        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    raise
        finally:
            _ACTIVE.reset(token)

    # ----------------------------------------------------------- compaction
    def compaction(self, run_id: str, compactor: str, trajectories: Sequence[Trajectory]) -> None:
        state = self._state(run_id)
        if state is None or state.round_span is None or self._tracer is None:
            return
        ok = [t for t in trajectories if not t.failed]
        span = self._tracer.start_span(
            f"pacore.compact {compactor}",
            context=trace.set_span_in_context(state.round_span),
            attributes={
                # No GenAI operation: compaction calls no model, runs no tool
                # the model chose and invokes no agent (see docs/tracing.md).
                oi.SPAN_KIND: oi.CHAIN,
                semconv.GEN_AI_CONVERSATION_ID: run_id,
                "pacore.compactor": compactor,
                "pacore.compact.messages": len(ok),
                "pacore.compact.chars_before": sum(len(t.content) for t in ok),
                "pacore.compact.chars_after": sum(len(t.message or "") for t in ok),
            },
        )
        span.end()


class _ExplorerSpan:
    """Lets the explore node put the trajectory's outcome on its span."""

    __slots__ = ("_outcome", "_span", "_tracer", "paused")

    def __init__(self, span: Span | None, tracer: RunTracer, outcome: _CallOutcome) -> None:
        self._span = span
        self._tracer = tracer
        self._outcome = outcome
        self.paused = False

    def pause(self) -> None:
        """The explorer paused the run (LangGraph's ``interrupt()``): no error, it resumes."""
        self.paused = True
        if self._span is not None:
            self._span.set_attribute("pacore.paused", True)

    def failed(self, exc: BaseException) -> None:
        """The explorer raised ``exc``: its type and message on the span (the trajectory
        keeps them too; the span's status is set by :meth:`record`)."""
        if self._span is not None:
            self._span.record_exception(exc)

    def record(self, t: Trajectory) -> None:
        span = self._span
        if span is None:
            return
        span.set_attributes(
            {
                semconv.GEN_AI_USAGE_INPUT_TOKENS: t.prompt_tokens,
                semconv.GEN_AI_USAGE_OUTPUT_TOKENS: t.completion_tokens,
                semconv.GEN_AI_RESPONSE_FINISH_REASONS: [
                    t.finish_reason or ("error" if t.failed else "")
                ],
                "pacore.latency_s": t.latency_s,
                "pacore.truncated": t.truncated,
                "pacore.tokens_estimated": t.tokens_estimated,
                "pacore.tool_calls": len(t.tool_calls),
            }
        )
        if t.model:
            span.set_attribute(semconv.GEN_AI_RESPONSE_MODEL, t.model)
        if t.failed:
            span.set_status(Status(StatusCode.ERROR, t.error or "failed"))
            span.set_attribute(
                semconv.ERROR_TYPE, self._outcome.error_type or semconv.error_type(t.error)
            )
        elif self._tracer.capture:
            span.set_attributes(
                {
                    semconv.GEN_AI_OUTPUT_MESSAGES: _output_json(t),
                    oi.OUTPUT_VALUE: t.content,
                    oi.OUTPUT_MIME_TYPE: oi.TEXT_MIME,
                }
            )
        else:
            # Phoenix would show {"model": ...} from gen_ai.response.model as the output.
            span.set_attributes(
                {oi.OUTPUT_VALUE: oi.NOT_CAPTURED, oi.OUTPUT_MIME_TYPE: oi.TEXT_MIME}
            )
