"""Coalescing callers that share a prompt but arrive apart into ``n``-sample requests.

A PaCoRe round does not need this: its explore node knows its K explorers
share one prompt and sends their one ``n=K`` request itself
(:class:`~pacore_graph.llm.shared_request.SharedRequest`, from
:meth:`~pacore_graph.graph.explorer.ChatExplorer.explore_round`). The
batcher is for callers that ask one sample each, at different moments,
without knowing of each other (a custom explorer calling
:meth:`~pacore_graph.graph.explorer.ChatExplorer.explore` per task): it
holds the first caller for a short window, and a group is sent as soon as
all ``expected`` callers have asked, or when the window closes (some never
do). A group's request is a :class:`SharedRequest` like a round's, so
chunking by the limiter, seeds, per-sample failures and streamed samples
behave the same.

The batcher also carries what a chat explorer's calls need (its client,
limiter, sampling and whether samples stream), so one object configures
both paths.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.llm.complete_only import chat_client
from pacore_graph.llm.protocols import ChatClient, SampleStreamingClient
from pacore_graph.llm.shared_request import SharedRequest
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
        self.client = chat_client(client)
        self.limiter = limiter
        self.params = params
        self.enabled = enabled
        self.stream_samples = stream_samples and streams_samples(self.client)
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

    def shared(
        self,
        messages: Sequence[Mapping[str, Any]],
        seeds: Sequence[int | None],
        *,
        params: SamplingParams | None = None,
        label: str | None = None,
    ) -> SharedRequest:
        """One request for callers that know they share ``messages`` (a round's explorers)."""
        return SharedRequest(
            self.client,
            self.limiter,
            messages,
            params or self.params,
            seeds,
            stream=self.stream_samples,
            label=label,
        )

    def _flush(self, groups: dict[Hashable, _Group], key: Hashable) -> None:
        pending = groups.pop(key, None)
        if pending is None:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        request = SharedRequest(
            self.client,
            self.limiter,
            pending.messages,
            pending.params,
            [w.seed for w in pending.waiters],
            stream=self.stream_samples,
            futures=[w.future for w in pending.waiters],
        )
        task = asyncio.get_running_loop().create_task(request.send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
