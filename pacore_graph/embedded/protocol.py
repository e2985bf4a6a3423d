"""The chat-completions request the embedded server accepts, checked before any decoding.

A field the server does not implement is refused with a 400 naming it, as
OpenAI answers an unknown argument, rather than silently ignored: a client
that asks for ``logit_bias`` or tools and gets plain samples back would be
misled. The fields accepted are the ones PaCoRe and ordinary OpenAI clients
send (the ``openai`` SDK, ``ChatOpenAI``, ``pacore serve --upstream``), and
``logprobs``/``top_logprobs`` as OpenAI bounds them (DeepConf reads them).

Bounds checked here, before the prompt is rendered (issue 31): at most
``max_messages`` messages, counted before they are validated one by one; and
text that is text -- a lone surrogate (``"\\ud800"`` is valid JSON but no
character) is a 400 naming the field, not a 500 from the tokenizer.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pacore_graph.embedded.token_logprobs import MAX_TOP_LOGPROBS
from pacore_graph.errors import PaCoReError

__all__ = [
    "MAX_STOP_STRINGS",
    "ChatMessage",
    "ChatRequest",
    "RequestError",
    "StreamOptions",
    "parse_request",
]

#: OpenAI's own limit on ``stop``.
MAX_STOP_STRINGS = 4


class RequestError(PaCoReError):
    """A request the server refuses: becomes an OpenAI-style 400 ``invalid_request_error``."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON error body, shaped as OpenAI's."""
        return {
            "error": {
                "message": str(self),
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message; ``content`` may be a string or a list of text parts (joined)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[_TextPart] | None = None

    def text(self) -> str:
        """The message's text (parts joined, ``None`` as empty)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)

    def for_template(self) -> dict[str, str]:
        """What the chat template sees (``developer`` is the newer name of ``system``)."""
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": self.text()}


class StreamOptions(_Strict):
    """``include_usage`` (OpenAI) and vLLM's ``continuous_usage_stats``."""

    include_usage: bool = False
    continuous_usage_stats: bool = False


class ChatRequest(_Strict):
    """The accepted fields; anything else is refused (``extra="forbid"``)."""

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    n: int = Field(1, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    return_token_ids: bool = False
    user: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if len(stops) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings")
        if any(not s for s in stops):
            raise ValueError("stop strings must not be empty")
        return value

    def stop_strings(self) -> tuple[str, ...]:
        """``stop`` as a tuple (empty when unset)."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def token_cap(self) -> int | None:
        """``max_completion_tokens`` (OpenAI's newer name) or ``max_tokens``."""
        return self.max_completion_tokens or self.max_tokens

    def logprob_alternatives(self) -> int | None:
        """``None`` without ``logprobs: true``; else ``top_logprobs`` (0 when unset)."""
        return (self.top_logprobs or 0) if self.logprobs else None


def parse_request(body: object, *, max_n: int, max_messages: int | None = None) -> ChatRequest:
    """The validated request, or :class:`RequestError` with the first problem in one line."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if max_messages is not None and isinstance(messages, list) and len(messages) > max_messages:
        raise RequestError(
            f"at most {max_messages} messages on this server (its context's tokens), "
            f"got {len(messages)}",
            param="messages",
        )
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise RequestError(
                f"Unrecognized request argument supplied: {where}",
                param=where,
                code="unsupported_parameter",
            ) from None
        raise RequestError(f"invalid {where or 'request'}: {first['msg']}", param=where) from None
    if request.top_logprobs is not None and not request.logprobs:
        # OpenAI refuses it too: alternatives are only returned with logprobs.
        raise RequestError("top_logprobs requires logprobs to be true", param="top_logprobs")
    if request.n > max_n:
        raise RequestError(
            f"n must be at most {max_n} on this server (its sequence slots), got {request.n}",
            param="n",
        )
    _check_text(request)
    return request


def _check_text(request: ChatRequest) -> None:
    """A 400 naming the first message or stop string that holds a lone surrogate."""
    fields = [(f"messages.{i}.content", m.text()) for i, m in enumerate(request.messages)]
    fields += [(f"stop.{i}", s) for i, s in enumerate(request.stop_strings())]
    for where, text in fields:
        if text.isascii():
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            raise RequestError(
                f"invalid {where}: it holds a lone surrogate (\\u{code:04x}), which is not "
                "a character; send text as UTF-8 or as JSON escapes of whole characters",
                param=where,
            ) from None
