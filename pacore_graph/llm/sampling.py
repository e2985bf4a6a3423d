"""Getting ``n`` samples of one prompt from any server, whatever goes wrong.

Both chat clients (the direct one and the LangChain adapter) ask for ``n``
samples in one request and must cope with the same three things, so the
logic lives here once:

- a server that ignores ``n`` (llama.cpp answers one choice): the missing
  samples are fetched one per request, each with its own seed
  (:func:`pacore_graph.values.seeds.sample_seed`), and the client remembers not to
  ask for ``n`` again;
- a batch request that fails for good (after its retries) with a retryable
  kind of error that belongs to the request (a 500, a dropped connection, a
  timeout): only that request's samples are missing, so they are asked again
  in two smaller requests, down to single samples; one bad request no longer
  fails all K explorers of a round. Failures of the server as a whole
  (unreachable, 429/503 overload) are not split: that would only add load;
- a choice that carries no content (``content: null``): that sample alone is
  a failure with its cause, its siblings stand.

The result is one outcome per sample: a :class:`Completion` or the
:class:`ModelCallError` that sample ended with.
"""

from __future__ import annotations

import abc
import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Self

from pacore_graph.errors import InvalidPromptError, MalformedReplyError, ModelCallError
from pacore_graph.values.records import Completion
from pacore_graph.values.seeds import sample_seed

if TYPE_CHECKING:
    from pacore_graph.settings.config import SamplingParams

__all__ = [
    "NSampler",
    "PerSampleClient",
    "RequestFn",
    "SampleOutcome",
    "check_encodable",
    "first_failure",
    "with_seed",
]

SampleOutcome = Completion | ModelCallError
"""What became of one requested sample."""

RequestFn = Callable[[int, int | None], Awaitable[Sequence[SampleOutcome]]]
"""One request (with its retries) for ``n`` samples with ``seed``: one outcome per choice
returned (possibly fewer than ``n``), or ModelCallError raised when the request failed."""


def with_seed(outcomes: Sequence[SampleOutcome], seed: int | None) -> list[SampleOutcome]:
    """Mark each completion with the seed its request carried (for traces and records)."""
    if seed is None:
        return list(outcomes)
    return [o if isinstance(o, ModelCallError) else replace(o, seed=seed) for o in outcomes]


def first_failure(outcomes: Sequence[SampleOutcome]) -> list[Completion]:
    """The completions, or the first sample's error raised (the all-or-nothing API)."""
    for outcome in outcomes:
        if isinstance(outcome, ModelCallError):
            raise outcome
    return [o for o in outcomes if isinstance(o, Completion)]


class PerSampleClient(abc.ABC):
    """A chat client built on ``complete_each``; ``complete`` is its all-or-nothing view.

    Every shipped client answers per sample (so the batcher can fail only
    the explorers whose samples failed); this base gives them the one
    ``complete`` the :class:`~pacore_graph.llm.client.ChatClient` protocol asks
    for, instead of a copy in each.

    It is also an async context manager: ``async with Client(...) as client:``
    closes what the client holds (its pooled HTTP sessions, health checks) on
    the way out. A client left open is closed only when the process ends,
    and aiohttp then warns "Unclosed client session" on stderr.
    """

    async def aclose(self) -> None:
        """Release what the client holds for this event loop (nothing, by default)."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]:
        """``n`` completions, or the first failed sample's error raised."""
        return first_failure(await self.complete_each(messages, n=n, params=params, seed=seed))

    @abc.abstractmethod
    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]:
        """One :class:`Completion` or :class:`ModelCallError` per requested sample."""


class NSampler:
    """Fetches ``n`` samples through a request function; remembers whether ``n`` is honoured.

    One per client (per server): ``supports_n`` is None until the server
    answers an ``n > 1`` request, then True or False. Pass
    ``supports_n=False`` for a backend that has no ``n``.
    """

    def __init__(self, *, supports_n: bool | None = None) -> None:
        self.supports_n = supports_n

    async def sample(self, request: RequestFn, n: int, seed: int | None) -> list[SampleOutcome]:
        """Exactly ``n`` outcomes, in sample order (sample ``j`` drew ``seed + j``)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if n == 1 or self.supports_n is False:
            return await self._singles(request, seed, 0, n)
        try:
            got = list(await request(n, seed))
        except ModelCallError as exc:
            if not exc.retryable or exc.server_wide:
                return [exc] * n
            # Retry only this request's samples, in two smaller requests.
            half = n // 2
            first, second = await asyncio.gather(
                self.sample(request, half, seed),
                self.sample(request, n - half, sample_seed(seed, half)),
            )
            return first + second
        if len(got) > n:
            # Extra choices are paid for and could not be counted: refused, not cut.
            error = MalformedReplyError(
                f"malformed reply from the server: {len(got)} choices for n={n}"
            )
            return [error] * n
        if len(got) == n:
            self.supports_n = True
            return got
        # The server ignored n: fetch the rest one by one (and remember).
        self.supports_n = False
        return got + await self._singles(request, seed, len(got), n)

    @staticmethod
    async def _singles(
        request: RequestFn, seed: int | None, start: int, stop: int
    ) -> list[SampleOutcome]:
        async def one(j: int) -> SampleOutcome:
            try:
                got = await request(1, sample_seed(seed, j))
            except ModelCallError as exc:
                return exc
            if not got:
                return MalformedReplyError("malformed reply from the server: no choices")
            return got[0]

        return list(await asyncio.gather(*(one(j) for j in range(start, stop))))


def check_encodable(messages: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a prompt that is not valid Unicode (lone surrogates) before it is sent.

    Such text (undecodable bytes read with ``surrogateescape``, or a
    ``"\\ud800"`` JSON escape in a dataset) would go out as an escape the
    server cannot decode and come back as a 500 that retries cannot fix.
    """
    try:
        json.dumps(list(messages), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidPromptError(
            f"the prompt is not valid UTF-8 text (lone surrogate at character {exc.start})"
        ) from None
