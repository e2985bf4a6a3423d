"""What one ``pacore serve`` process is configured with (CLI flags, or Python)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field

from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.settings.fields import SERVE_SETTINGS, SETTINGS
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.compactor_registry import CompactorRegistry

__all__ = [
    "API_KEY_ENV_VAR",
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_QUEUE_TIMEOUT_S",
    "ServeSettings",
]

#: Environment variable holding the key clients must send (``--api-key``).
API_KEY_ENV_VAR = "PACORE_SERVE_API_KEY"

_ROWS = SERVE_SETTINGS
#: Largest request body read (``--max-body-bytes``): a 131072-token conversation
#: is well under 1 MB of JSON; more is refused with 413 before it is read.
DEFAULT_MAX_BODY_BYTES: int = _ROWS["max_body_bytes"].default
#: Open connections at most (``--max-connections``); over it uvicorn answers 503.
DEFAULT_MAX_CONNECTIONS: int = _ROWS["max_connections"].default
#: Seconds a connection may take to send a request's headers (``--header-timeout``).
DEFAULT_HEADER_TIMEOUT_S: float = _ROWS["header_timeout"].default
#: Seconds a request may take to send its whole body (``--body-timeout``): 408 after.
DEFAULT_BODY_TIMEOUT_S: float = _ROWS["body_timeout"].default
#: Deepest JSON nesting a body may have (a chat request needs about 5).
DEFAULT_MAX_JSON_DEPTH = 32
#: Requests waiting for a run slot at most (``--max-queue``); more get 429. Generous:
#: a waiting request costs a connection and a few KiB, and a queue, unlike a 429,
#: keeps arrival order; under ``--max-connections`` (512) it rarely binds.
DEFAULT_MAX_QUEUE: int = _ROWS["max_queue"].default
#: Seconds a request may wait for a slot (``--queue-timeout``): then 503. Half the
#: ``openai`` SDK's 600 s default timeout, so a queued client hears back in time.
DEFAULT_QUEUE_TIMEOUT_S: float = _ROWS["queue_timeout"].default


def _check_upstream(url: str, index: int) -> None:
    """An http(s) URL without credentials; the error never quotes a password."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(f"--upstream #{index} is not a valid URL") from None
    del port
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"--upstream #{index} must not carry credentials (user:pass@); "
            "give the upstream key with --upstream-api-key or PACORE_API_KEY"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--upstream must be an http(s) URL, got {url!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """Settings of the server; validated once, when the app is created.

    ``upstreams`` are replicas of ``model`` (an OpenAI-compatible base URL
    each); ``api_key`` is the key *clients* must present (None: open), while
    ``upstream_api_key`` is sent to the upstreams. ``max_concurrency`` bounds
    runs in progress; more wait in arrival order, at most ``max_queue`` of them
    (beyond: 429 with ``Retry-After``) for at most ``queue_timeout_s`` (None:
    no limit; then 503 with ``Retry-After``); ``max_samples_in_flight`` bounds
    upstream sequences across all runs. ``passthrough`` relays requests for a
    model name an upstream serves (``model`` or its ``/v1/models``) as they
    came, under the same queue and caps.

    What one request may ask for is capped by ``limits`` (rounds, samples,
    ``max_tokens``; 400 over them) and its compactor chosen among
    ``compactors`` (built-ins unless the deployment registers more); the
    transport is bounded by ``max_body_bytes`` (413), ``max_json_depth``
    (400), ``max_connections`` (503 from uvicorn), ``header_timeout_s`` (the
    connection is closed) and ``body_timeout_s`` (408).
    """

    upstreams: tuple[str, ...]
    model: str
    api_key: str | None = None
    upstream_api_key: str | None = None
    max_concurrency: int = _ROWS["max_concurrency"].default
    max_queue: int = DEFAULT_MAX_QUEUE
    queue_timeout_s: float | None = DEFAULT_QUEUE_TIMEOUT_S
    passthrough: bool = _ROWS["passthrough"].default
    max_samples_in_flight: int = _ROWS["max_samples_in_flight"].default
    compactor: str = SETTINGS["compactor"].default
    sampling: SamplingParams = field(default_factory=SamplingParams)
    retry: ModelRetryPolicy = field(default_factory=ModelRetryPolicy)
    retry_after_s: int = 1
    limits: RequestLimits = field(default_factory=RequestLimits)
    compactors: CompactorRegistry = field(default_factory=CompactorRegistry)
    tracing: TraceOptions | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    keep_alive_s: float = 5.0

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ValueError("at least one --upstream URL is required")
        for i, url in enumerate(self.upstreams):
            _check_upstream(url, i)
        if len(set(self.upstreams)) < len(self.upstreams):
            raise ValueError("an --upstream is given twice; each replica is named once")
        if not self.model:
            raise ValueError("--model must name the upstream's served model")
        # The flags' bounds are their rows' (settings/fields.SERVE_SETTINGS), checked here only.
        for name in ("max_concurrency", "max_queue", "max_samples_in_flight", "max_connections"):
            _ROWS[name].check(getattr(self, name), _ROWS[name].option_string)
        _ROWS["max_body_bytes"].check(self.max_body_bytes, "--max-body-bytes")
        _ROWS["header_timeout"].check(self.header_timeout_s, "header_timeout_s")
        _ROWS["body_timeout"].check(self.body_timeout_s, "body_timeout_s")
        if self.queue_timeout_s is not None and not self.queue_timeout_s > 0:
            raise ValueError(
                f"--queue-timeout must be > 0 (None: no limit), got {self.queue_timeout_s}"
            )
        if self.retry_after_s < 0:
            raise ValueError("retry_after_s must be >= 0")
        if not 4 <= self.max_json_depth <= 512:
            raise ValueError(f"max_json_depth must be in [4, 512], got {self.max_json_depth}")
        if not self.keep_alive_s > 0:
            raise ValueError("keep_alive_s must be > 0")
        # The run's max_tokens against its cap: the settings model's own check, same text.
        self.limits.check_settings(max_tokens=self.sampling.max_tokens)

    def config(self) -> PaCoReConfig:
        """The configuration the server's graph is built with (requests' settings apply to it)."""
        return PaCoReConfig(
            sampling=self.sampling, retry=self.retry, max_concurrency=self.max_samples_in_flight
        )
