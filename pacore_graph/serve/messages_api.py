"""The Anthropic Messages API (``POST /v1/messages``) as a second face of the same runs.

Agent tools and SDKs that speak Anthropic's protocol (the ``anthropic`` SDK,
tools built on it, optillm's Anthropic front) cannot use an OpenAI endpoint.
Rather than a second server, a Messages body is read as the chat-completions
body it stands for (:func:`chat_request`) and goes through the one validator
(:func:`~pacore_graph.serve.protocol.parse_request`): the same model names
(``pacore-high``, ``pacore:8,2``, ``rsa:16,4,10`` ...), caps, queue, metrics
and auth. Only the shapes differ:

- the request: ``system`` (a string or text blocks), ``messages`` whose
  ``content`` is a string or content blocks (text; thinking blocks a client
  sends back are dropped), ``max_tokens`` required as Anthropic requires it;
  PaCoRe's own ``rounds``, ``compactor`` and ``seed`` ride along as extra
  fields, as with the ``openai`` SDK's ``extra_body``. Fields PaCoRe cannot
  honour (``tools``, ``stop_sequences``, ``top_k``, images) are refused with a
  400 naming them, unless sent with their neutral value;
- the answer: a ``message`` whose content is a ``thinking`` block (the
  answer's reasoning, when there is some) and a ``text`` block (the answer);
  ``usage.input_tokens`` / ``output_tokens`` are the run's effective prompt
  and completion tokens (its effective TTC), with the per-round breakdown
  under ``usage.rounds`` as the chat answer has it; ``stop_reason`` is
  ``max_tokens`` when the answer was cut, else ``end_turn``;
- the stream (:class:`MessageStreamWire`): ``message_start``, the rounds'
  progress as a ``thinking`` block (``thinking_delta`` events), the answer as
  a ``text`` block (``text_delta``), each closed by ``content_block_stop``,
  then ``message_delta`` with ``stop_reason`` and usage, and
  ``message_stop``: the event sequence of Anthropic's own API, so
  ``client.messages.stream(...)`` accumulates the same message a plain call
  returns. ``thinking: {"type": "disabled"}`` leaves the thinking out;
- errors: Anthropic's ``{"type": "error", "error": {"type", "message"}}``
  (:func:`~pacore_graph.serve.errors.error_body_for`), 529 for an overloaded
  server, and an ``error`` event once a stream has begun.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.serve.errors import APIError, anthropic_error_body, anthropic_status
from pacore_graph.serve.protocol import RunRequest, usage_body
from pacore_graph.settings.fields import serve_names
from pacore_graph.values.records import PaCoReResult

__all__ = [
    "MessageStreamWire",
    "chat_request",
    "message_body",
    "message_id",
    "stop_reason",
]

#: Fields of a Messages request read here (the run settings pass on as they came).
#: ``metadata`` (a user id) and ``cache_control`` (a caching hint) are accepted and ignored.
_OWN = frozenset(
    {"model", "messages", "system", "max_tokens", "stream", "thinking", "metadata", "cache_control"}
)
#: Fields accepted only with these neutral values (what PaCoRe cannot honour).
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "stop_sequences": (None, []),
    "top_k": (None,),
    "tools": (None, []),
    "tool_choice": (None, {"type": "auto"}, {"type": "none"}),
    "service_tier": (None, "auto", "standard_only"),
}
_THINKING = ("enabled", "disabled", "adaptive")


def _bad(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


def _text_blocks(content: Any, where: str, *, drop_thinking: bool) -> str:
    """A message's or system prompt's text: a string, or its text blocks joined by blank lines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where}: content must be a string or a list of content blocks", "messages")
    texts: list[str] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif drop_thinking and kind in ("thinking", "redacted_thinking"):
            continue  # clients send an assistant turn's thinking back; it is not the problem
        else:
            shown = kind if isinstance(kind, str) else type(block).__name__
            raise _bad(
                f"{where}: content block type {shown!r} is not supported by PaCoRe serving "
                "(text blocks only)",
                "messages",
            )
    return "\n\n".join(texts)


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("messages: Field required (a non-empty list of messages)", "messages")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = _text_blocks(system, "system", drop_thinking=False)
        if text:
            out.append({"role": "system", "content": text})
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise _bad(f"messages.{i}: each message needs a role 'user' or 'assistant'", "messages")
        role = message["role"]
        text = _text_blocks(message.get("content"), f"messages.{i}", drop_thinking=True)
        out.append({"role": role, "content": text})
    if out[-1]["role"] != "user":
        raise _bad(
            "messages: the last message must be the user's (a prefilled assistant turn "
            "is not supported: PaCoRe writes the whole answer)",
            "messages",
        )
    return out


def _thinking_shown(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict) or value.get("type") not in _THINKING:
        raise _bad(f"thinking: type must be one of {', '.join(_THINKING)}", "thinking")
    return bool(value["type"] != "disabled")


def chat_request(body: Any) -> tuple[dict[str, Any], bool]:
    """The chat-completions body a Messages body stands for, and whether thinking is shown.

    Raises :class:`~pacore_graph.serve.errors.APIError` (400) naming the first
    field that is malformed or asks for something PaCoRe cannot do; the
    returned body is then validated as any chat request is.
    """
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    settings = set(serve_names())
    for key, value in body.items():
        if key in _OWN or key in settings:
            continue
        if key in _NEUTRAL:
            if value in _NEUTRAL[key]:
                continue
            raise _bad(f"{key}: not supported by PaCoRe serving (got {value!r})", key)
        raise _bad(f"{key}: Extra inputs are not permitted", key)
    if body.get("max_tokens") is None:
        raise _bad("max_tokens: Field required", "max_tokens")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _bad("metadata: must be an object such as {'user_id': ...}", "metadata")
    chat: dict[str, Any] = {
        key: body[key] for key in ("model", "stream", *sorted(settings)) if key in body
    }
    chat["messages"] = _messages(body)
    return chat, _thinking_shown(body.get("thinking"))


def message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def stop_reason(result: PaCoReResult) -> str:
    """Anthropic's ``stop_reason`` for the answer: ``max_tokens`` when it was cut."""
    return "max_tokens" if result.final.finish_reason == "length" else "end_turn"


def _usage(result: PaCoReResult) -> dict[str, Any]:
    usage = usage_body(result)
    return {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        "rounds": usage["rounds"],
    }


def message_body(
    request: RunRequest, result: PaCoReResult, id_: str, thinking: bool = True
) -> dict[str, Any]:
    """The ``message`` object a finished run answers with."""
    content: list[dict[str, Any]] = []
    if thinking and result.reasoning:
        content.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    content.append({"type": "text", "text": result.answer})
    return {
        "id": id_,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": stop_reason(result),
        "stop_sequence": None,
        "usage": _usage(result),
    }


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    """One SSE event with its ``event:`` line (the ``anthropic`` SDK dispatches on it)."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


@dataclass(slots=True)
class MessageStreamWire:
    """Anthropic's stream events for one run (a :class:`~pacore_graph.serve.streaming.StreamWire`).

    Progress deltas (``reasoning_content``) go into a ``thinking`` block, the
    answer's (``content``) into a ``text`` block; a block is closed when the
    other kind begins. Once the answer has begun, later progress is not sent
    (a text block is never followed by thinking, as in Anthropic's streams).
    """

    id: str
    model: str
    thinking: bool = True
    _index: int = -1
    _open: str | None = None
    _answered: bool = field(default=False)

    def opening(self) -> Iterator[bytes]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        yield _event("message_start", {"type": "message_start", "message": message})

    def _switch(self, kind: str) -> Iterator[bytes]:
        if self._open == kind:
            return
        yield from self._close()
        self._index += 1
        self._open = kind
        block = (
            {"type": "thinking", "thinking": "", "signature": ""}
            if kind == "thinking"
            else {"type": "text", "text": ""}
        )
        yield _event(
            "content_block_start",
            {"type": "content_block_start", "index": self._index, "content_block": block},
        )

    def _close(self) -> Iterator[bytes]:
        if self._open is not None:
            yield _event("content_block_stop", {"type": "content_block_stop", "index": self._index})
            self._open = None

    def _text(self, text: str) -> Iterator[bytes]:
        self._answered = True
        yield from self._switch("text")
        delta = {"type": "text_delta", "text": text}
        yield _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": self._index, "delta": delta},
        )

    def delta(self, delta: Mapping[str, Any]) -> Iterator[bytes]:
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning and self.thinking and not self._answered:
            yield from self._switch("thinking")
            thought = {"type": "thinking_delta", "thinking": reasoning}
            yield _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": self._index, "delta": thought},
            )
        content = delta.get("content")
        if isinstance(content, str) and content:
            yield from self._text(content)

    def failure(self, status: int, message: str, code: str | None) -> Iterator[bytes]:
        yield _event("error", anthropic_error_body(anthropic_status(status), message))

    def closing(self, result: PaCoReResult, streamed_content: bool) -> Iterator[bytes]:
        if not streamed_content:
            yield from self._text(result.answer)
        yield from self._close()
        usage = _usage(result)
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(result), "stop_sequence": None},
                "usage": {
                    "input_tokens": usage["input_tokens"],
                    "output_tokens": usage["output_tokens"],
                },
            },
        )
        yield _event("message_stop", {"type": "message_stop"})
