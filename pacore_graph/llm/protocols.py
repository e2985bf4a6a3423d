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

    Raises :class:`~pacore_graph.errors.ModelCallError` when the call fails for
    good; returns exactly ``n`` completions otherwise.

    A client may also offer ``complete_each`` (same arguments, one
    ``Completion`` or ``ModelCallError`` per sample, never raising for a
    failed sample): the batcher then fails only the explorers whose samples
    failed, not all K of the request. Both shipped clients do.
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
