"""Clients that only ``complete``: adapted once, where a client is given, to the full protocol.

The :class:`~pacore_graph.llm.protocols.ChatClient` protocol asks for
``complete_each`` (a round's ``n=K`` request answered per sample), ``complete``
and ``aclose`` with ``async with``. A client written against the first
protocol, which asked only for ``model`` and ``complete``, still works: the
builder (or whichever part receives the client) wraps it here, once, so
nothing below ever probes a client for an optional method. Its samples then
fail together, as its ``complete`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.errors import ModelCallError
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.llm.sampling import PerSampleClient, SampleOutcome
from pacore_graph.settings.config import SamplingParams

__all__ = ["CompleteOnlyClient", "chat_client"]


class CompleteOnlyClient(PerSampleClient):
    """A client with only ``model`` and ``complete(...)``, as a full :class:`ChatClient`.

    ``complete_each`` is its ``complete``: all samples, or the call's
    :class:`~pacore_graph.errors.ModelCallError` for each. ``aclose`` closes
    the wrapped client when it has an ``aclose`` of its own. Other
    attributes (``base_url``, ``provider_name``, ...) are the wrapped
    client's, so traces still say where calls go.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model: str = inner.model

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"CompleteOnlyClient({self.inner!r})"

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]:
        try:
            return list(await self.inner.complete(messages, n=n, params=params, seed=seed))
        except ModelCallError as exc:
            return [exc] * n

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def chat_client(client: object) -> ChatClient:
    """``client`` as a full :class:`ChatClient`: itself, or adapted if it only completes.

    TypeError (naming what is missing) for anything that is neither.
    """
    if isinstance(client, ChatClient):
        return client
    if callable(getattr(client, "complete", None)) and isinstance(
        getattr(client, "model", None), str
    ):
        return CompleteOnlyClient(client)
    raise TypeError(
        "client must be a ChatClient: a 'model' name and async complete_each(...), "
        "complete(...) and aclose() (derive from pacore_graph.PerSampleClient to write only "
        f"complete_each), or at least 'model' and complete(...); got {client!r}"
    )
