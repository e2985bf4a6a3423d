"""One ``n``-sample request for callers that share a prompt, sent by whoever holds it.

Every explorer of a round sees the same input P(x, M), so K separate HTTP
requests would carry the same prompt K times. A :class:`SharedRequest` is
that round's one ``n=K`` request: each caller awaits its own sample
(:meth:`SharedRequest.result`), and :meth:`SharedRequest.send` fetches them
all. The graph's explore node calls ``send`` itself, in its own task, so
the POST is a plain call down from the node and a failed call's traceback
shows the node and the explorer that made it (and a note says which round
and which explorers). The :class:`~pacore_graph.llm.batching.SampleBatcher`
uses the same class for callers that arrive apart.

Requests are cut into chunks of at most the limiter's capacity, and each
chunk holds one limiter unit per sample: ``max_concurrency`` bounds
sequences in flight on the server, batched or not.

Seeds: each caller brings its own (:func:`pacore_graph.values.seeds.explorer_seed`).
Callers are served in seed order and a chunk is sent with its first caller's
seed, so when the server ignores ``n`` and the request is split, sample
``j`` goes out with ``seed + j``: the seed that caller would have sent
alone. The client reports each sample's outcome
(:meth:`~pacore_graph.llm.protocols.ChatClient.complete_each`), so a failed
sample fails only its own caller.

Straggler control (``--round-quorum`` / ``--round-deadline``) needs each
sample as soon as it is done, which a JSON ``n=K`` response cannot give.
With ``stream=True`` (and a client that offers ``stream_each``) a chunk is
one streamed request: each caller's sample is resolved when its choice
finishes, and once every caller still waiting has given up (the round's
gate cancelled them) the request is abandoned, which closes the HTTP
response so the server stops decoding those samples. A JSON chunk is
abandoned the same way once all its callers have given up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import MalformedReplyError, UpstreamTransportError
from pacore_graph.llm.protocols import ChatClient, SampleStreamingClient
from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["SharedRequest"]


class SharedRequest:
    """``len(seeds)`` samples of ``messages``: caller ``i`` awaits ``result(i)``.

    ``futures``, when given, are the callers' own (one per seed, the
    batcher's); otherwise the request makes them. ``label`` says who sends
    the request (e.g. "round 1's request (ChatExplorer, explorers 0-7)"):
    it is added as a note to every error a caller gets, so a traceback
    names the round and explorers even where the call ran elsewhere.
    """

    __slots__ = ("client", "futures", "label", "limiter", "messages", "params", "seeds", "stream")

    def __init__(
        self,
        client: ChatClient,
        limiter: SequenceLimiter,
        messages: Sequence[Mapping[str, Any]],
        params: SamplingParams,
        seeds: Sequence[int | None],
        *,
        stream: bool = False,
        label: str | None = None,
        futures: Sequence[asyncio.Future[Completion]] | None = None,
    ) -> None:
        if not seeds:
            raise ValueError("a shared request needs at least one caller")
        if stream and not isinstance(client, SampleStreamingClient):
            raise TypeError(f"stream=True needs a client with stream_each; got {client!r}")
        self.client = client
        self.limiter = limiter
        self.messages = messages
        self.params = params
        self.seeds = tuple(seeds)
        self.stream = stream
        self.label = label
        if futures is None:
            loop = asyncio.get_running_loop()
            futures = [loop.create_future() for _ in self.seeds]
        elif len(futures) != len(self.seeds):
            raise ValueError("one future per seed")
        self.futures = tuple(futures)

    async def result(self, i: int) -> Completion:
        """Caller ``i``'s sample (its error raised); cancelling this gives the sample up."""
        return await self.futures[i]

    async def send(self) -> None:
        """Fetch every sample: one request per chunk of at most the limiter's capacity.

        Never raises for a failed call (each caller gets the error); a chunk
        nobody waits for any more is abandoned. One chunk runs right here,
        in the caller's task; several run concurrently.
        """
        # Seed order, so that sample j of a chunk is the caller whose seed is first + j.
        order = sorted(range(len(self.seeds)), key=lambda i: _seed_key(self.seeds[i]))
        step = self.limiter.capacity
        chunks = [order[start : start + step] for start in range(0, len(order), step)]
        if len(chunks) == 1:
            await self._fetch(chunks[0])
            return
        async with asyncio.TaskGroup() as tg:
            for chunk in chunks:
                tg.create_task(self._fetch(chunk))

    async def _fetch(self, chunk: list[int]) -> None:
        """One request for the callers ``chunk``, given up once all of them have."""
        futures = [self.futures[i] for i in chunk]
        try:
            async with _abandoned_with(futures), self.limiter.hold(len(chunk)):
                if self.stream:
                    await self._stream(futures, self.seeds[chunk[0]])
                else:
                    outcomes = await self.client.complete_each(
                        self.messages,
                        n=len(chunk),
                        params=self.params,
                        seed=self.seeds[chunk[0]],
                    )
                    self._deliver(futures, outcomes)
        except Exception as exc:  # the whole chunk's failure: each of its callers gets it
            for future in futures:
                self._settle(future, exc)
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()  # abandoned, or this task was cancelled

    def _deliver(self, futures: list[asyncio.Future[Completion]], outcomes: Any) -> None:
        for future, outcome in zip(futures, outcomes, strict=False):
            self._settle(future, outcome)
        for future in futures[len(outcomes) :]:
            self._settle(future, MalformedReplyError("the client returned too few samples"))

    async def _stream(self, futures: list[asyncio.Future[Completion]], seed: int | None) -> None:
        client = self.client
        assert isinstance(client, SampleStreamingClient)
        samples = client.stream_each(self.messages, n=len(futures), params=self.params, seed=seed)
        async with contextlib.aclosing(samples):
            async for index, outcome in samples:
                if 0 <= index < len(futures):
                    self._settle(futures[index], outcome)
        for future in futures:
            self._settle(future, UpstreamTransportError("the stream ended without this sample"))

    def _settle(
        self, future: asyncio.Future[Completion], outcome: SampleOutcome | Exception
    ) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            if self.label is not None:
                note = f"in {self.label}"
                if note not in getattr(outcome, "__notes__", ()):  # one error may serve K
                    outcome.add_note(note)
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _seed_key(seed: int | None) -> int:
    return -1 if seed is None else seed


@contextlib.asynccontextmanager
async def _abandoned_with(futures: Sequence[asyncio.Future[Any]]) -> Any:
    """Cut the body short once every caller is done and one of them gave up.

    Futures resolve one by one for a streamed request: once each is either
    resolved or cancelled (a round's gate dropped the stragglers), the
    request is abandoned, which closes its HTTP response so the server stops
    decoding the dropped samples. A JSON request's futures resolve only all
    together, so this is "all cancelled". The body is cut by a timeout
    scope moved to now, so it runs in the caller's own task (no task of its
    own to cancel) and a cancellation of that task still goes through.
    """
    loop = asyncio.get_running_loop()
    waiting = len(futures)
    gave_up = False
    inside = True
    scope = asyncio.timeout(None)

    def check(future: asyncio.Future[Any]) -> None:  # once per future, when it is done
        nonlocal waiting, gave_up
        waiting -= 1
        gave_up = gave_up or future.cancelled()
        if waiting == 0 and gave_up and inside:
            scope.reschedule(loop.time())

    try:
        async with scope:
            for future in futures:
                future.add_done_callback(check)
            try:
                yield
            finally:
                inside = False
    except TimeoutError:
        if not scope.expired():
            raise  # the call's own timeout, not an abandoned request
