"""The catalogue of the settings of a run: each declared once, every surface a view of it.

A run's shape and sampling are one validated model,
:class:`~pacore_graph.settings.config.PaCoReConfig`; the client, the
endpoint, tracing and the per-request caps sit beside it. People reach them
from five places: ``pacore`` flags, ``PACORE_*`` variables, a ``pacore
serve`` request, a served graph's per-run context and an eval method spec.
Each setting is one :class:`Setting` row here -- its flat name, where it
lives in the config (``temperature`` is ``sampling.temperature``; ``None``
for one the config does not hold), its help, default and bounds -- and every
surface is generated from the rows:

- the config models declare their fields with :func:`config_field`
  (description, default and bounds from the row);
- :class:`~pacore_graph.settings.env_settings.PaCoReSettings`, the
  flag > ``PACORE_*`` variable > default model, has one generated field per
  row (every row has its variable, :attr:`Setting.env`);
- :mod:`~pacore_graph.settings.options` builds the flags (help text, type,
  choices and the default it shows) from the rows marked ``flag``;
- :mod:`~pacore_graph.settings.per_run` builds the graph's context schema and
  the per-run validator from the rows marked ``per_run``;
- ``pacore serve`` honours the request fields of the rows marked ``serve``;
- a method setting names the method families that read it (``families``);
- :meth:`~pacore_graph.settings.config.PaCoReConfig.with_settings` is the one
  mapping from flat names onto a config (and so onto ``SamplingParams``).

Each bound is checked by one validator: a config field's by the config
model, a per-request cap's by
:class:`~pacore_graph.settings.request_limits.RequestLimits` and a round's own
sampling by :meth:`Setting.check`; the settings model only parses the text.

Plain data, no pydantic: ``pacore --help`` is built from it without loading
the models.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pacore_graph.errors import PaCoReError
from pacore_graph.settings.presets import PRESETS
from pacore_graph.values.compaction import DEFAULT_COMPACTOR
from pacore_graph.values.trace_kinds import TRACE_KINDS

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "EMBEDDED_MAX_CONCURRENCY",
    "EMBEDDED_MAX_TOKENS",
    "ENV_PREFIX",
    "LIMIT_NAMES",
    "ROUND_CONTROL_NAMES",
    "SERVE_ENV_PREFIX",
    "SERVE_SETTINGS",
    "SETTINGS",
    "BoundError",
    "Setting",
    "config_field",
    "env_name",
    "per_run_names",
    "serve_names",
]

#: Every setting ``NAME`` is read from the environment variable ``PACORE_NAME``.
ENV_PREFIX = "PACORE_"
#: ``pacore serve``'s own settings are ``PACORE_SERVE_NAME`` (``PACORE_SERVE_API_KEY``).
SERVE_ENV_PREFIX = "PACORE_SERVE_"

#: The embedded model is a 135M model on a CPU: without a cap it may ramble to
#: the end of its context, so runs on it default to this many tokens per call.
EMBEDDED_MAX_TOKENS = 256
#: The embedded server decodes up to 16 sequences together; more in flight only queue there.
EMBEDDED_MAX_CONCURRENCY = 16


def env_name(name: str) -> str:
    """``max_tokens`` -> ``PACORE_MAX_TOKENS``."""
    return ENV_PREFIX + name.upper()


class BoundError(PaCoReError, ValueError):
    """A value outside its row's bounds; ``name`` is the row's (so each surface can label it).

    A ``ValueError`` too: a bound is checked inside pydantic validators (a
    ``Round`` parsed from a request's JSON), and pydantic turns only a
    ``ValueError`` into the validation error a client is shown.
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One run setting: its flat name, its place in the config and how it is checked.

    ``path`` is where it lives in ``PaCoReConfig`` (``None`` for a setting
    that selects rather than holds a value: ``preset`` picks ``rounds``,
    ``compactor`` is the builder's). ``kind`` is the type of one value as
    text is parsed into it (the CLI's ``type``); ``ge``/``gt``/``le`` its
    bounds; ``unset`` what no value means (for help texts); ``per_run`` and
    ``serve`` say whether a served graph's run and a ``pacore serve`` request
    may set it.
    """

    name: str
    path: tuple[str, ...] | None
    help: str
    kind: type = str
    default: Any = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    unset: str = "unset"
    shown: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    repeatable: bool = False
    flag: bool = True
    families: tuple[str, ...] = ()
    per_run: bool = False
    serve: bool = False
    prefix: str = ENV_PREFIX

    @property
    def env(self) -> str:
        """The ``PACORE_*`` variable this setting is read from (every row has one)."""
        return self.prefix + self.name.upper()

    @property
    def option_string(self) -> str:
        """The command-line flag (``max_tokens`` -> ``--max-tokens``)."""
        return "--" + self.name.replace("_", "-")

    def default_text(self) -> str:
        """The default as ``--help`` states it (``shown``, else the default, else ``unset``)."""
        if self.shown is not None:
            return self.shown
        if self.default is None:
            return self.unset
        if isinstance(self.default, tuple):
            return ",".join(str(v) for v in self.default)
        return str(self.default)

    def check(self, value: Any, what: str | None = None) -> Any:
        """``value`` held to this row's type (int or number) and bounds; returns it.

        The one bound check of the values no pydantic model holds (a
        :class:`~pacore_graph.settings.rounds.Round`'s own sampling, the
        :class:`~pacore_graph.settings.request_limits.RequestLimits` caps).
        Raises :class:`BoundError` naming ``what`` (default: the row's name).
        """
        label = what or self.name
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise BoundError(self.name, f"{label} must be an integer, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise BoundError(self.name, f"{label} must be a number, got {value!r}")
        if (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
        ):
            raise BoundError(self.name, f"{label} must be {self.bounds_text()}, got {value!r}")
        return value

    def bounds(self) -> dict[str, Any]:
        """The bounds as pydantic ``Field`` keywords."""
        return {
            k: v for k, v in (("ge", self.ge), ("gt", self.gt), ("le", self.le)) if v is not None
        }

    def bounds_text(self) -> str:
        """``in [0.0, 2.0]``, ``>= 1``-style text for help and errors ('' when unbounded)."""
        low = f"[{self.ge}" if self.ge is not None else f"({self.gt}" if self.gt is not None else ""
        if not low:
            return f"<= {self.le}" if self.le is not None else ""
        if self.le is None:
            return f">= {self.ge}" if self.ge is not None else f"> {self.gt}"
        return f"in {low}, {self.le}]"


_SEED_BOUND = 2**63
#: The largest value an operator may give a request cap: limits exist to be finite.
_LIMIT_CEILING = 100_000_000
#: Model calls in flight at most (``--max-concurrency``), and ``pacore serve``'s runs at once.
DEFAULT_MAX_CONCURRENCY = 64

_ROWS = (
    Setting(
        name="preset",
        path=None,
        help="round widths by name: "
        + " ".join(f"{name}={list(widths)}" for name, widths in PRESETS.items()),
        choices=tuple(PRESETS),
        shown="low, unless --rounds is given",
        per_run=True,
    ),
    Setting(
        name="rounds",
        path=("rounds",),
        help="round widths K, e.g. 8,2 (a final K=1 round is added); in Python and JSON a "
        "round may also be a Round (k with its own temperature, top_p, max_tokens, model)",
        kind=int,
        default=PRESETS["low"],
        shown="the preset's widths",
        per_run=True,
        serve=True,
    ),
    Setting(
        name="final",
        path=("final",),
        help="the answer round's own sampling and model: a round of k=1 setting any of "
        "temperature, top_p, max_tokens, model (unset: the run's)",
        kind=dict,
        flag=False,  # JSON: a variable (PACORE_FINAL='{"temperature": 0.2}') or a context key
        per_run=True,
    ),
    Setting(
        name="base_url",
        path=None,
        help="OpenAI-compatible server, e.g. http://localhost:8000/v1; repeat it (or separate "
        "URLs by commas in the variable) for several replicas of one model (samples go to "
        "the least loaded one)",
        repeatable=True,
        metavar="URL",
        shown="start the embedded model",
    ),
    Setting(
        name="model",
        path=None,
        help="served model name (required with --base-url)",
    ),
    Setting(
        name="api_key",
        path=None,
        help="API key sent to the server",
        shown="$OPENAI_API_KEY, else none",
    ),
    Setting(
        name="session_header",
        path=None,
        help="HTTP header each request of one PaCoRe run carries the run's id in, so a "
        "session-aware router (Ray Serve LLM, llm-d) keeps the run on one replica; "
        "none to send no such header",
        default="x-session-id",
        metavar="NAME",
    ),
    Setting(
        name="compactor",
        path=None,
        help="how a trajectory is compacted for the next round: conclusion | answer | "
        "budget:N | a registered name (module:attr from the command line only)",
        default=DEFAULT_COMPACTOR,
        per_run=True,
        serve=True,
    ),
    Setting(
        name="temperature",
        path=("sampling", "temperature"),
        help="sampling temperature sent with every call",
        kind=float,
        default=1.0,
        shown="1.0, the public pipeline's",
        ge=0.0,
        le=2.0,
        per_run=True,
        serve=True,
    ),
    Setting(
        name="top_p",
        path=("sampling", "top_p"),
        help="nucleus sampling top-p sent with every call",
        kind=float,
        default=1.0,
        shown="1.0, the public pipeline's",
        gt=0.0,
        le=1.0,
        per_run=True,
        serve=True,
    ),
    Setting(
        name="max_tokens",
        path=("sampling", "max_tokens"),
        help="completion tokens per call at most (unset: the server's context decides)",
        kind=int,
        ge=1,
        shown=f"{EMBEDDED_MAX_TOKENS} on the embedded model, unset otherwise",
        per_run=True,
        serve=True,
    ),
    Setting(
        name="seed",
        path=("sampling", "seed"),
        help="base sampling seed: explorer i of round r is sent seed + 1000*r + i "
        "(a 64-bit integer)",
        kind=int,
        ge=-_SEED_BOUND,
        le=_SEED_BOUND - 1,
        per_run=True,
        serve=True,
    ),
    Setting(
        name="timeout",
        path=("sampling", "timeout"),
        help="seconds per model call attempt",
        kind=float,
        default=600.0,
        gt=0.0,
    ),
    Setting(
        name="logprobs",
        path=("sampling", "logprobs"),
        help="ask for token log-probabilities (kept in trajectories, for RL export)",
        kind=bool,
        default=False,
    ),
    Setting(
        name="token_ids",
        path=None,
        help="ask vLLM for completion token ids (return_token_ids), for RL export",
        kind=bool,
        default=False,
    ),
    Setting(
        name="retries",
        path=("retry", "max_attempts"),
        help="attempts per call (429, 5xx and connection errors are retried)",
        kind=int,
        default=4,
        ge=1,
        le=20,
    ),
    Setting(
        name="call_deadline",
        path=("retry", "deadline"),
        help="seconds one model call may take in all: its attempts, backoffs and n-splits "
        "(unset: the per-attempt timeout x retries)",
        kind=float,
        gt=0.0,
        shown="timeout x retries",
    ),
    Setting(
        name="shuffle_seed",
        path=("shuffle_seed",),
        help="seed of the shuffle of each round's messages before synthesis (order bias)",
        kind=int,
        default=42,
    ),
    Setting(
        name="reference_order",
        path=("reference_order",),
        help="synthesis references: 'public' orders them exactly as the public PaCoRe "
        "pipeline; 'compacted' drops failed/empty messages, then sorts compacted ones",
        default="public",
        choices=("public", "compacted"),
    ),
    Setting(
        name="round_quorum",
        path=("round_quorum",),
        help="close a round once Q explorers finished: a share of K (0.75) or a count (24); "
        "the rest are cancelled and recorded as dropped (one request per explorer, since an "
        "n=K request returns its samples together)",
        metavar="Q",
        unset="none, every explorer finishes",
    ),
    Setting(
        name="round_deadline",
        path=("round_deadline",),
        help="close a round S seconds after it started (once one explorer finished); the "
        "rest are cancelled and recorded as dropped",
        kind=float,
        gt=0.0,
        metavar="S",
        unset="none",
    ),
    Setting(
        name="early_stop_consensus",
        path=("early_stop_consensus",),
        help="end the run after a round whose extracted answers agree at share >= F, "
        "answering with the majority message",
        kind=float,
        gt=0.0,
        le=1.0,
        metavar="F",
        unset="none, every round runs",
    ),
    Setting(
        name="token_budget",
        path=("token_budget",),
        help="completion tokens per problem: later rounds shrink K to fit (never below 1; "
        "the final K=1 round always runs)",
        kind=int,
        ge=1,
        metavar="N",
        unset="none, no budget",
    ),
    Setting(
        name="reference_filter",
        path=("reference_filter",),
        families=("pacore",),
        help="PaCoRe's synthesis rounds read only the most confident share F of the previous "
        "round (by DeepConf's lowest group confidence over windows of W tokens, 2048 unless "
        "given as confidence:F,W); asks the server for logprobs",
        metavar="confidence:F",
        unset="none, every reference is read",
    ),
    Setting(
        name="consensus_weight",
        path=("consensus_weight",),
        families=("pacore",),
        help="how --early-stop-consensus counts PaCoRe's votes: count (one each) or confidence "
        "(each weighs its trajectory's lowest group confidence; asks the server for logprobs)",
        default="count",
        choices=("count", "confidence"),
    ),
    Setting(
        name="rsa_final",
        path=("rsa_final",),
        families=("rsa",),
        help="how rsa:N,K,T answers: majority (a vote over the last population) or aggregate "
        "(one more aggregation of K candidates, whose answer is the run's)",
        default="majority",
        choices=("majority", "aggregate"),
    ),
    Setting(
        name="deepconf_keep",
        path=("deepconf_keep",),
        families=("deepconf", "deepconf-online"),
        help="DeepConf's kept share F by lowest group confidence: deepconf:N votes with its top "
        "F of traces; deepconf-online:N stops later traces below the (1 - F) percentile of "
        "its warm-up",
        kind=float,
        gt=0.0,
        le=1.0,
        metavar="F",
        unset="0.1 for deepconf:N (DeepConf-low), 0.9 for deepconf-online:N (DeepConf-high)",
    ),
    Setting(
        name="deepconf_window",
        path=("deepconf_window",),
        families=("deepconf", "deepconf-online"),
        help="DeepConf's sliding window in tokens (deepconf:N and deepconf-online:N): a trace is "
        "as confident as its weakest window; one shorter than it is one group, never stopped",
        kind=int,
        default=2048,  # control.confidence.DEFAULT_WINDOW (the paper's; a test keeps them equal)
        ge=1,
        metavar="N",
    ),
    Setting(
        name="max_concurrency",
        path=("max_concurrency",),
        help="model calls in flight at most, shared by all problems",
        kind=int,
        default=DEFAULT_MAX_CONCURRENCY,
        ge=1,
        le=100_000,
        shown=f"{EMBEDDED_MAX_CONCURRENCY} on the embedded model, else {DEFAULT_MAX_CONCURRENCY}",
    ),
    Setting(
        name="max_rounds",
        path=None,
        help="cap on configured rounds per request (a final K=1 round is added)",
        kind=int,
        default=16,
        ge=1,
        le=1024,  # the graph's recursion limit follows it
    ),
    Setting(
        name="max_samples_per_request",
        path=None,
        help="cap on model calls of all rounds of one request (problem), final round included",
        kind=int,
        default=4096,
        ge=2,
        le=_LIMIT_CEILING,
    ),
    Setting(
        name="max_tokens_cap",
        path=None,
        help="cap on max_tokens per call that a request (or --max-tokens) may ask for",
        kind=int,
        default=131_072,  # the paper's context
        ge=1,
        le=_LIMIT_CEILING,
    ),
    Setting(
        name="client",
        path=None,
        help="direct aiohttp client (fast) or LangChain ChatOpenAI",
        default="direct",
        choices=("direct", "langchain"),
    ),
    Setting(
        name="no_batch",
        path=None,
        help="one request per explorer, not n=K",
        kind=bool,
        default=False,
    ),
    Setting(
        name="trace",
        path=None,
        help="OpenTelemetry export: console | otlp (OTEL_* env) | jaeger | langfuse",
        choices=tuple(TRACE_KINDS),
        shown="OTEL_TRACES_EXPORTER if set, else none",
    ),
    Setting(
        name="trace_project",
        path=None,
        help="project the spans are filed under (Arize Phoenix's openinference.project.name)",
        default="pacore",
        min_length=1,
        max_length=200,
    ),
    Setting(
        name="trace_content",
        path=None,
        help="record prompts and completions in spans (off unless asked)",
        kind=bool,
        default=False,
    ),
    Setting(
        name="no_progress",
        path=None,
        help="no progress bar",
        kind=bool,
        default=False,
    ),
)

#: Every run setting by flat name, in help order.
SETTINGS: dict[str, Setting] = {row.name: row for row in _ROWS}

_SERVE_ROWS = (
    Setting(
        name="upstream",
        path=None,
        help="OpenAI-compatible model server, e.g. http://gpu1:8000/v1; repeat for replicas",
        repeatable=True,
        shown="start the embedded model, as pacore run does",
    ),
    Setting(
        name="model",
        path=None,
        help="the upstreams' served model name, with --upstream",
        shown="the embedded model",
    ),
    Setting(
        name="host",
        path=None,
        help="address to listen on; one not on loopback needs an API key or --allow-no-auth",
        default="127.0.0.1",
    ),
    Setting(
        name="port", path=None, help="port to listen on", kind=int, default=8000, ge=0, le=65535
    ),
    Setting(
        name="api_key",
        path=None,
        help="key clients must send as Bearer",
        shown="none: open",
    ),
    Setting(
        name="allow_no_auth",
        path=None,
        help="serve without an API key on a non-loopback --host (anyone who can reach it "
        "starts upstream work); a warning is printed",
        kind=bool,
        default=False,
    ),
    Setting(
        name="upstream_api_key",
        path=None,
        help="key sent upstream",
        shown="$PACORE_API_KEY/$OPENAI_API_KEY",
    ),
    Setting(
        name="max_concurrency",
        path=None,
        help="runs at once (more wait in the queue)",
        kind=int,
        default=DEFAULT_MAX_CONCURRENCY,
        ge=1,
    ),
    Setting(
        name="max_queue",
        path=None,
        help="requests waiting for a run slot, in arrival order; beyond, 429",
        kind=int,
        default=1024,
        ge=0,
        le=1_000_000,
    ),
    Setting(
        name="queue_timeout",
        path=None,
        help="seconds a request may wait in the queue, then 503; 0 for no limit",
        kind=float,
        default=300.0,  # half the openai SDK's 600 s timeout: a queued client hears back
        ge=0.0,
    ),
    Setting(
        name="passthrough",
        path=None,
        help="relay requests for a model the upstream serves (--model, its /v1/models) unchanged",
        kind=bool,
        default=True,
    ),
    Setting(
        name="max_samples_in_flight",
        path=None,
        help="upstream sequences in flight at most, over all runs and replicas",
        kind=int,
        default=256,
        ge=1,
        le=100_000,
    ),
    Setting(
        name="max_body_bytes",
        path=None,
        help="largest request body; larger get 413",
        kind=int,
        default=4 * 1024 * 1024,  # a 131072-token conversation is well under 1 MB of JSON
        ge=1024,
        le=1024**3,
    ),
    Setting(
        name="max_connections",
        path=None,
        help="open connections at most; beyond, requests get 503",
        kind=int,
        default=512,
        ge=1,
    ),
    Setting(
        name="header_timeout",
        path=None,
        help="seconds a connection may take to send a request's headers",
        kind=float,
        default=10.0,
        gt=0.0,
    ),
    Setting(
        name="body_timeout",
        path=None,
        help="seconds a request may take to send its body; then 408",
        kind=float,
        default=30.0,
        gt=0.0,
    ),
    Setting(
        name="drain_timeout",
        path=None,
        help="seconds SIGTERM waits for runs",
        kind=int,
        default=600,
        ge=0,
    ),
    Setting(
        name="log_level",
        path=None,
        help="uvicorn's log level",
        default="info",
        choices=("debug", "info", "warning", "error"),
    ),
)

#: ``pacore serve``'s own settings (the server's, not a run's), in help order: its
#: flags and the defaults and bounds of
#: :class:`~pacore_graph.serve.settings.ServeSettings`. Its sampling options are
#: rows of :data:`SETTINGS`; these are read from ``PACORE_SERVE_<NAME>`` variables
#: (``PACORE_SERVE_API_KEY``, ``PACORE_SERVE_MAX_QUEUE``, ...).
SERVE_SETTINGS: dict[str, Setting] = {
    row.name: replace(row, prefix=SERVE_ENV_PREFIX) for row in _SERVE_ROWS
}

#: The per-request caps (:class:`~pacore_graph.settings.request_limits.RequestLimits`).
LIMIT_NAMES = ("max_rounds", "max_samples_per_request", "max_tokens_cap")
#: Straggler control, early stop and the token budget (``run`` and ``eval``): off unless asked.
ROUND_CONTROL_NAMES = ("round_quorum", "round_deadline", "early_stop_consensus", "token_budget")


def per_run_names() -> tuple[str, ...]:
    """The settings a served graph's run may set (its context schema)."""
    return tuple(name for name, row in SETTINGS.items() if row.per_run)


def serve_names() -> tuple[str, ...]:
    """The settings a ``pacore serve`` request may set (besides its model name)."""
    return tuple(name for name, row in SETTINGS.items() if row.serve)


def config_field(name: str, **extra: Any) -> Any:
    """The pydantic ``Field`` a config model declares for setting ``name``.

    Description, default and bounds come from the row, so the model, the
    flags' help and the served schemas cannot drift apart.
    """
    from pydantic import Field

    row = SETTINGS[name]
    return Field(row.default, description=row.help, **row.bounds(), **extra)
