"""What the PaCoRe graph streams, and the helpers its nodes use to stream it.

Two of LangGraph's stream modes carry PaCoRe-specific data:

``stream_mode="messages"``
    The final round's tokens as ``AIMessageChunk`` objects while the server
    generates them (the final call goes over server-sent events), the way a
    LangChain chat model's tokens stream. Content deltas are the chunks'
    ``content``; reasoning deltas come as chunks with empty content and
    ``additional_kwargs["reasoning_content"]``. Joined, the chunks' content is
    the final trajectory's text (``result.final.content``). The chunks share
    one message id with the answer ``AIMessage`` that ``finalize`` appends, so
    LangGraph does not send that message a second time. Only the final K=1
    synthesis round streams: the K explorers of earlier rounds would
    interleave, and their text is not the answer.

``stream_mode="custom"``
    Progress events, plain dicts (this is a contract: servers built on the
    graph, e.g. an OpenAI-compatible front end, consume it)::

        {"event": "round_started", "round": r, "width": K}
        {"event": "explorer_finished", "round": r, "index": i,
         "completion_tokens": n, "error": None | "text"}
        {"event": "round_compacted", "round": r, "messages": kept,
         "failures": f, "completion_tokens": total}

    ``round`` is 0-based; ``messages`` is how many compacted messages the
    round passes on (its successful trajectories); ``completion_tokens`` of
    ``round_compacted`` is the round's total.

Neither costs anything when nobody streams that mode: the writer LangGraph
hands a node is a no-op then, and a final call streams over SSE only when a
``messages`` stream (a LangChain streaming callback handler) is listening.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackManager
from langchain_core.messages import AIMessageChunk, convert_to_messages
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult
from langchain_core.runnables import RunnableConfig

from pacore_graph.llm.client import DeltaCallback
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion, Trajectory

__all__ = [
    "StreamingChatClient",
    "TokenStream",
    "answer_message_id",
    "explorer_finished",
    "progress_writer",
    "round_compacted",
    "round_started",
    "wants_tokens",
]


@runtime_checkable
class StreamingChatClient(Protocol):
    """A chat client that can stream one sample (``OpenAICompatClient`` does)."""

    model: str

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        params: SamplingParams,
        seed: int | None = None,
        on_delta: DeltaCallback,
    ) -> Completion: ...


def round_started(round_index: int, width: int) -> dict[str, Any]:
    """The ``round_started`` progress event."""
    return {"event": "round_started", "round": round_index, "width": width}


def explorer_finished(trajectory: Trajectory) -> dict[str, Any]:
    """The ``explorer_finished`` progress event of one trajectory."""
    return {
        "event": "explorer_finished",
        "round": trajectory.round,
        "index": trajectory.index,
        "completion_tokens": trajectory.completion_tokens,
        "error": trajectory.error,
    }


def round_compacted(round_index: int, trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """The ``round_compacted`` progress event of a finished round."""
    return {
        "event": "round_compacted",
        "round": round_index,
        "messages": sum(1 for t in trajectories if not t.failed),
        "failures": sum(1 for t in trajectories if t.failed),
        "completion_tokens": sum(t.completion_tokens for t in trajectories),
    }


def answer_message_id(run_id: str) -> str:
    """The id shared by the streamed chunks and the answer ``AIMessage`` of one run."""
    return f"pacore-{run_id}"


def _handlers(config: RunnableConfig) -> list[Any]:
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        return list(callbacks.handlers)
    return list(callbacks or ())


def wants_tokens(config: RunnableConfig) -> bool:
    """True when a token stream listens (LangGraph's ``messages`` mode, ``astream_events``).

    The same test LangChain chat models make before streaming: is one of the
    run's callback handlers a streaming handler?
    """
    try:
        from langchain_core.tracers._streaming import _StreamingCallbackHandler
    except ImportError:  # pragma: no cover - older langchain_core
        return False
    return any(isinstance(h, _StreamingCallbackHandler) for h in _handlers(config))


class TokenStream:
    """Reports one streamed model call to LangChain callbacks, as a chat model would.

    LangGraph's ``messages`` mode listens to ``on_chat_model_start`` /
    ``on_llm_new_token`` / ``on_llm_end``; emitting them here turns the
    direct client's SSE deltas into ``AIMessageChunk`` events without putting
    LangChain on the call path.
    """

    def __init__(self, config: RunnableConfig, *, message_id: str, model: str) -> None:
        self._config = config
        self._message_id = message_id
        self._model = model
        self._run: Any = None

    async def start(self, messages: Sequence[Mapping[str, Any]]) -> None:
        manager = AsyncCallbackManager.configure(
            inheritable_callbacks=self._config.get("callbacks"),
            inheritable_tags=self._config.get("tags"),
            inheritable_metadata=self._config.get("metadata"),
        )
        runs = await manager.on_chat_model_start(
            {"name": self._model},
            [list(convert_to_messages([dict(m) for m in messages]))],
            run_id=uuid.uuid4(),
            invocation_params={"model": self._model, "stream": True},
            name=self._model,
        )
        self._run = runs[0]

    async def on_delta(self, kind: str, text: str) -> None:
        if kind == "content":
            chunk = AIMessageChunk(content=text, id=self._message_id)
        else:
            chunk = AIMessageChunk(
                content="", id=self._message_id, additional_kwargs={"reasoning_content": text}
            )
        await self._run.on_llm_new_token(
            text if kind == "content" else "", chunk=ChatGenerationChunk(message=chunk)
        )

    async def end(self, completion: Completion | None, error: BaseException | None) -> None:
        if self._run is None:
            return
        if error is not None or completion is None:
            await self._run.on_llm_error(error or RuntimeError("no completion"))
            return
        message = AIMessageChunk(content=completion.content, id=self._message_id)
        await self._run.on_llm_end(
            LLMResult(generations=[[ChatGeneration(message=message)]], llm_output=None)
        )


def _discard(event: Any) -> None:
    return None


def progress_writer() -> Any:
    """The ``custom`` stream writer of the running node; a no-op outside a graph run."""
    try:
        from langgraph.config import get_stream_writer

        return get_stream_writer()
    except (RuntimeError, KeyError):
        return _discard
