"""What a scripted model's responder sees and answers: one choice of one request.

Why a module of its own: responders (the default one, the method oracle,
users' own) are written against these types without needing the server that
calls them, and the server imports responders by name for its command line;
keeping the types apart keeps that a line, not a circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.testing.logprobs import Confidence

__all__ = ["RespondFn", "RespondResult", "ScriptedReply", "ScriptedRequest", "ScriptedToolCall"]


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """What a responder sees: one choice of one chat-completions request.

    It is frozen so a responder cannot smuggle state between calls through it;
    answers must be a function of the input.
    """

    messages: list[dict[str, Any]]
    """The request's ``messages`` as sent (dicts in the OpenAI shape)."""
    last_user: str
    """Text of the last ``user`` message ('' if none), content parts joined."""
    sample_index: int
    """Which of the request's ``n`` choices this is, 0..n-1."""
    model: str
    """The ``model`` field of the request."""
    params: dict[str, Any]
    """Every other body field: ``n``, ``max_tokens``, ``temperature``, ``seed``, ``tools``..."""
    headers: dict[str, str] = field(default_factory=dict)
    """Request headers, names lower-cased (HTTP header names are case-insensitive)."""
    attempt: int = 0
    """0-based count of earlier requests with the identical body (retries)."""

    @property
    def seed(self) -> int | None:
        """The request's ``seed``, the usual way PaCoRe tells explorers apart."""
        seed = self.params.get("seed")
        return seed if isinstance(seed, int) else None


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A tool call the scripted model makes (for tool-loop explorer tests)."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    """JSON text, or a mapping that is serialised to JSON."""
    id: str | None = None
    """Call id; ``None`` derives a stable one from the name and position."""


@dataclass(frozen=True, slots=True)
class ScriptedReply:
    """The scripted model's output for ONE choice.

    ``finish_reason=None`` is computed (``"length"`` when truncated by
    ``max_tokens``, ``"tool_calls"`` when tool calls are present, else
    ``"stop"``); ``completion_tokens=None`` is the word count of the generated
    text (reasoning + content).  An explicit ``completion_tokens`` lets a test
    pretend the model wrote more than the text shows, e.g. to force truncation.
    ``confidence`` is each token's DeepConf confidence when ``logprobs`` are
    asked (see :mod:`pacore_graph.testing.logprobs`): one number for every
    token, one per token, or None for a stable hash of the token.
    """

    content: str
    reasoning: str | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    confidence: Confidence = None


RespondResult = ScriptedReply | str
RespondFn = Callable[[ScriptedRequest], RespondResult | Awaitable[RespondResult]]
"""A responder: request in, reply for one choice out (may be async).  ``str`` = content."""
