"""What the graph asks of a model client: the protocols, and nothing that implements them.

Kept apart from the clients so that code that only needs the shape of a
client (the graph builder, serve, eval, the batcher) does not import aiohttp
or any transport.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["ChatClient", "DeltaCallback", "SampleStreamingClient"]


@runtime_checkable
class ChatClient(Protocol):
    """What an explorer needs from a model: ``n`` samples of one conversation.

    ``complete_each`` returns one :class:`~pacore_graph.values.records.Completion`
    or :class:`~pacore_graph.errors.ModelCallError` per sample and never
    raises for a failed sample: a round's ``n=K`` request goes through it,
    so a failed sample fails only its own explorer. ``complete`` is the
    all-or-nothing view (exactly ``n`` completions, or the first failed
    sample's error raised). A client holds connections, so it is an async
    context manager: ``async with client:`` (or ``await client.aclose()``)
    releases them.

    Deriving from :class:`~pacore_graph.llm.sampling.PerSampleClient`
    (``pacore_graph.PerSampleClient``) means writing only ``complete_each``.
    A client with only ``model`` and ``complete`` (this protocol's first
    form) is adapted where it is given
    (:func:`~pacore_graph.llm.complete_only.chat_client`).
    """

    model: str

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]: ...

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class SampleStreamingClient(Protocol):
    """A client that can stream one ``n``-sample request, each sample as it finishes.

    ``stream_each`` yields ``(index, outcome)`` for every sample ``0..n-1``
    exactly once, in the order they finish; closing the iterator (or
    cancelling the task reading it) abandons the request, and the server
    stops generating the samples nobody waits for any more. Straggler
    control uses it to keep a round one ``n=K`` request.
    """

    model: str

    def stream_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        params: SamplingParams,
        seed: int | None = None,
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]: ...


#: Called with ("content" | "reasoning", text) for each streamed delta.
DeltaCallback = Callable[[str, str], Awaitable[None]]
