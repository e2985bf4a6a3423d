"""Coalescing K explorers that share one prompt into ``n``-sample requests.

Every explorer of a round sees the same input P(x, M), so K separate HTTP
requests carry the same prompt K times. Records, traces and stream events stay
per explorer, while this layer joins their model calls into one request with
``n=K`` (the graph then sends the round's explorers as one LangGraph task,
:class:`~pacore_graph.graph.explorer.ExploreGroup`): vLLM
decodes the K samples with a shared prefix, and the client does 1/K of the
HTTP work. A group is sent as soon as all K explorers have asked, or after a
short window when some never do (a custom explorer that skips the call).

Requests are cut into chunks of at most the limiter's capacity, and each
chunk holds one limiter unit per sample: ``max_concurrency`` bounds sequences
in flight on the server, batched or not.

Seeds: each caller brings its own (:func:`pacore_graph.values.seeds.explorer_seed`).
A group's callers are served in seed order and a chunk is sent with its first
caller's seed, so when the request has to be split (a server that ignores
``n``) sample ``j`` goes out with ``seed + j``: the seed that caller would
have sent alone. With a client that reports each sample's outcome
(``complete_each``) a failed sample fails only its own caller.

Straggler control (``--round-quorum`` / ``--round-deadline``) needs each
sample as soon as it is done, which a JSON ``n=K`` response cannot give. With
``stream_samples`` and a client that offers ``stream_each``
(:class:`~pacore_graph.llm.client.SampleStreamingClient`), a chunk is one
streamed ``n``-sample request: each caller's future is resolved when its
choice finishes, and once every caller still waiting has been cancelled (the
round's gate dropped them) the request is abandoned, which closes the HTTP
response so the server stops decoding those samples. Without such a client
the graph falls back to one request per explorer
(:func:`streams_samples` decides).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import MalformedReplyError, UpstreamTransportError
from pacore_graph.llm.protocols import ChatClient, SampleStreamingClient
from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["SampleBatcher", "streams_samples"]


def streams_samples(client: object) -> bool:
    """Whether ``client`` can stream an ``n``-sample request sample by sample."""
    return isinstance(client, SampleStreamingClient)


@dataclass(slots=True)
class _Waiter:
    seed: int | None
    future: asyncio.Future[Completion]


@dataclass(slots=True)
class _Group:
    messages: Sequence[Mapping[str, Any]]
    expected: int
    params: SamplingParams
    waiters: list[_Waiter] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


class SampleBatcher:
    """Hands out single samples, fetching them from the client in ``n``-batches."""

    def __init__(
        self,
        client: ChatClient,
        limiter: SequenceLimiter,
        params: SamplingParams,
        *,
        enabled: bool = True,
        window_s: float = 0.005,
        stream_samples: bool = False,
    ) -> None:
        self.client = client
        self.limiter = limiter
        self.params = params
        self.enabled = enabled
        self.stream_samples = stream_samples and streams_samples(client)
        """Chunks are streamed requests whose samples resolve one by one (see module doc)."""
        self.window_s = window_s
        self._groups: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, _Group]
        ] = weakref.WeakKeyDictionary()
        self._tasks: set[asyncio.Task[None]] = set()

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        group: Hashable,
        expected: int,
        seed: int | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """One sample of ``messages``; callers with the same ``group`` share a request.

        ``group`` must identify the prompt (e.g. run id and round), ``expected``
        is how many callers will ask for it. ``params`` overrides the batcher's
        sampling settings for this run (the group's first caller's win).
        """
        params = params or self.params
        if not self.enabled or expected <= 1:
            async with self.limiter.hold(1):
                (completion,) = await self.client.complete(messages, n=1, params=params, seed=seed)
            return completion
        loop = asyncio.get_running_loop()
        groups = self._groups.get(loop)
        if groups is None:
            groups = self._groups[loop] = {}
        pending = groups.get(group)
        if pending is None:
            pending = groups[group] = _Group(messages=messages, expected=expected, params=params)
            pending.timer = loop.call_later(self.window_s, self._flush, groups, group)
        fut: asyncio.Future[Completion] = loop.create_future()
        pending.waiters.append(_Waiter(seed, fut))
        if len(pending.waiters) >= pending.expected:
            self._flush(groups, group)
        return await fut

    def _flush(self, groups: dict[Hashable, _Group], key: Hashable) -> None:
        pending = groups.pop(key, None)
        if pending is None:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        # Seed order, so that sample j of a chunk is the caller whose seed is first + j.
        waiters = sorted(pending.waiters, key=lambda w: -1 if w.seed is None else w.seed)
        step = self.limiter.capacity
        for start in range(0, len(waiters), step):
            chunk = waiters[start : start + step]
            task = asyncio.get_running_loop().create_task(self._fetch(pending, chunk))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            _cancel_when_abandoned(task, chunk)

    async def _fetch(self, group: _Group, waiters: list[_Waiter]) -> None:
        seed = waiters[0].seed
        complete_each = getattr(self.client, "complete_each", None)
        try:
            async with self.limiter.hold(len(waiters)):
                outcomes: Sequence[SampleOutcome]
                if self.stream_samples:
                    await self._stream(group, waiters, seed)
                    return
                if complete_each is not None:
                    outcomes = await complete_each(
                        group.messages, n=len(waiters), params=group.params, seed=seed
                    )
                else:
                    outcomes = await self.client.complete(
                        group.messages, n=len(waiters), params=group.params, seed=seed
                    )
        except asyncio.CancelledError:
            for w in waiters:
                w.future.cancel()
            raise
        except Exception as exc:
            for w in waiters:
                if not w.future.done():
                    w.future.set_exception(exc)
            return
        for w, outcome in zip(waiters, outcomes, strict=False):
            if w.future.done():
                continue
            if isinstance(outcome, BaseException):
                w.future.set_exception(outcome)
            else:
                w.future.set_result(outcome)
        for w in waiters[len(outcomes) :]:
            if not w.future.done():
                w.future.set_exception(MalformedReplyError("the client returned too few samples"))

    async def _stream(self, group: _Group, waiters: list[_Waiter], seed: int | None) -> None:
        """One streamed request for ``waiters``; each resolved as its sample finishes."""
        client = self.client
        assert isinstance(client, SampleStreamingClient)
        samples = client.stream_each(group.messages, n=len(waiters), params=group.params, seed=seed)
        async with contextlib.aclosing(samples):
            async for index, outcome in samples:
                if 0 <= index < len(waiters):
                    _settle(waiters[index].future, outcome)
        for w in waiters:
            if not w.future.done():
                w.future.set_exception(
                    UpstreamTransportError("the stream ended without this sample")
                )


def _settle(future: asyncio.Future[Completion], outcome: SampleOutcome) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _cancel_when_abandoned(task: asyncio.Task[None], waiters: list[_Waiter]) -> None:
    """Cancel a shared fetch once nobody waits on it and somebody gave up.

    The fetch runs in its own task, so cancelling a run (a client that went
    away) would otherwise leave it queued on the limiter or retrying, and
    still send a request nobody reads. A streamed fetch resolves its callers
    one by one: once each is either resolved or cancelled (a round's gate
    dropped the stragglers), cancelling it closes the response and the
    server stops decoding the dropped samples. Without streaming, futures
    are resolved only all together, so this is "all cancelled", as before.
    """

    waiting = len(waiters)
    gave_up = False

    def check(future: asyncio.Future[Any]) -> None:  # once per waiter, when it is done
        nonlocal waiting, gave_up
        waiting -= 1
        gave_up = gave_up or future.cancelled()
        if waiting == 0 and gave_up and not task.done():
            task.cancel()

    for w in waiters:
        w.future.add_done_callback(check)
