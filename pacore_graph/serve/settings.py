"""What one ``pacore serve`` process is configured with (CLI flags, or Python)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pacore_graph.config import RetryPolicy, SamplingParams

__all__ = ["API_KEY_ENV_VAR", "ServeSettings"]

#: Environment variable holding the key clients must send (``--api-key``).
API_KEY_ENV_VAR = "PACORE_SERVE_API_KEY"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """Settings of the server; validated once, when the app is created.

    ``upstreams`` are replicas of ``model`` (an OpenAI-compatible base URL
    each); ``api_key`` is the key *clients* must present (None: open), while
    ``upstream_api_key`` is sent to the upstreams. ``max_concurrency`` bounds
    PaCoRe runs in progress (more get 429 with ``Retry-After``);
    ``max_samples_in_flight`` bounds upstream sequences across all runs.
    """

    upstreams: tuple[str, ...]
    model: str
    api_key: str | None = None
    upstream_api_key: str | None = None
    max_concurrency: int = 64
    max_samples_in_flight: int = 256
    compactor: str = "conclusion"
    sampling: SamplingParams = field(default_factory=SamplingParams)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    retry_after_s: int = 1
    graph_cache_size: int = 64

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ValueError("at least one --upstream URL is required")
        for url in self.upstreams:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"--upstream must be an http(s) URL, got {url!r}")
        if not self.model:
            raise ValueError("--model must name the upstream's served model")
        if self.max_concurrency < 1:
            raise ValueError(f"--max-concurrency must be >= 1, got {self.max_concurrency}")
        if not 1 <= self.max_samples_in_flight <= 100_000:
            raise ValueError("--max-samples-in-flight must be in [1, 100000]")
        if self.retry_after_s < 0 or self.graph_cache_size < 1:
            raise ValueError("retry_after_s must be >= 0 and graph_cache_size >= 1")
