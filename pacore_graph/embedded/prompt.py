"""A chat request's prompt as token ids: bounded before the tokenizer, message text kept text.

Three rules, all from an attack on ``pacore model serve`` (issue 31):

- **Too long is refused from its length alone.** No text of ``b`` UTF-8 bytes
  tokenizes into fewer than ``b / max_token_bytes`` tokens (the vocabulary's
  longest token: 81 bytes for SmolLM2), so a prompt that cannot fit the
  context is refused before the tokenizer sees it: the messages' characters
  are counted first (a character is at least a byte), then the rendered
  prompt's bytes.
- **The tokenizer's work is linear, and stops at the context.** llama.cpp's
  special-token pass is superlinear in the markers of one piece of text
  (440 KB of ``<|im_end|>a`` took 47-100 s), and it cuts the text at every
  control token anyway, tokenizing the pieces apart. So the prompt is cut
  likewise, after a control token every :data:`CHUNK_CHARS` characters or
  so, and tokenized piece by piece -- the same ids as in one call (a test
  holds this) -- stopping with a 400 once the context is passed. Cutting is
  off when the vocabulary's control tokens overlap each other (where to cut
  would then depend on llama.cpp's matching order).
- **A message's text is text.** A user who writes ``<|im_end|>`` must get the
  characters, not the control token that ends a turn (else they forge the
  assistant's or the system's turn). When no message spells a control
  token, the rendered prompt is tokenized with control tokens parsed, as
  before: the template's own markers are the only ones in it. When one
  does, the prompt is cut into the template's text (markers parsed) and each
  message's text (tokenized plain) by :meth:`ChatTemplate.segments`; a
  template that edits message text cannot be cut so, and such a request is
  refused (400) rather than tokenized with the forged marker.

A template that put message text directly against part of a control token
(``'<|im_' + content``) could still let the two form one marker; no chat
template we know of does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, Protocol

from pacore_graph.embedded.chat_template import ChatTemplate
from pacore_graph.embedded.protocol import RequestError

__all__ = ["CHUNK_CHARS", "PromptTokenizer", "Tokenizer"]

#: About how many characters of prompt go to the tokenizer in one call.
CHUNK_CHARS: Final = 4096


class Tokenizer(Protocol):
    """What :class:`PromptTokenizer` needs of the engine (:class:`~.engine.BatchEngine`)."""

    @property
    def max_token_bytes(self) -> int: ...

    @property
    def control_texts(self) -> frozenset[str]: ...

    @property
    def boundary_texts(self) -> frozenset[str]: ...

    def tokenize(self, text: str, *, special: bool = True) -> list[int]: ...


def _overlap(texts: frozenset[str]) -> bool:
    """Whether one text contains another, or ends where another begins."""
    for a in texts:
        for b in texts:
            if a != b and b in a:
                return True
            if any(a.endswith(b[:k]) for k in range(1, min(len(a), len(b)))):
                return True
    return False


class PromptTokenizer:
    """Messages to the prompt's token ids for a context of ``n_ctx`` tokens."""

    def __init__(self, template: ChatTemplate, tokenizer: Tokenizer, n_ctx: int) -> None:
        self.template = template
        self.tokenizer = tokenizer
        self.n_ctx = n_ctx
        control = tokenizer.control_texts
        boundaries = sorted(tokenizer.boundary_texts, key=len, reverse=True)
        self._cut_after = (
            re.compile("|".join(map(re.escape, boundaries)))
            if boundaries and not _overlap(control)
            else None
        )

    def tokens(self, messages: Sequence[Mapping[str, str]], *, completion: int) -> list[int]:
        """The prompt's ids; :class:`RequestError` if it cannot fit beside ``completion`` tokens.

        Raises :class:`~.chat_template.ChatTemplateError` when the template
        refuses the messages. Runs the tokenizer: call it off the event loop.
        """
        room = max(0, self.n_ctx - completion)
        most_bytes = room * self.tokenizer.max_token_bytes
        texts = [message["content"] for message in messages]
        chars = sum(map(len, texts))
        if chars > most_bytes:
            raise self._too_long(chars, "characters", completion)
        rendered = self.template.render(messages)
        size = len(rendered.encode("utf-8"))
        if size > most_bytes:
            raise self._too_long(size, "bytes", completion)
        control = self.tokenizer.control_texts
        if not any(marker in text for text in texts for marker in control):
            parts = [(chunk, False) for chunk in self._chunks(rendered)]
        else:
            cut = self.template.segments(messages)
            if cut is None:
                raise RequestError(
                    "a message spells one of this model's control tokens, and its chat "
                    "template edits message text, so the token cannot be kept as text; "
                    "remove it",
                    param="messages",
                )
            parts = [
                (chunk, is_message)
                for text, is_message in cut
                for chunk in ([text] if is_message else self._chunks(text))
            ]
        ids: list[int] = []
        for done, (text, is_message) in enumerate(parts, 1):
            ids.extend(self.tokenizer.tokenize(text, special=not is_message))
            if len(ids) > room and done < len(parts):  # whole: the caller's exact message
                raise self._too_long(len(ids), "", completion)
        return ids

    def _chunks(self, text: str) -> Iterator[str]:
        """``text`` cut right after control tokens, in pieces of about :data:`CHUNK_CHARS`."""
        if self._cut_after is None or len(text) <= CHUNK_CHARS:
            yield text
            return
        start = 0
        for found in self._cut_after.finditer(text):
            if found.end() - start >= CHUNK_CHARS:
                yield text[start : found.end()]
                start = found.end()
        if start < len(text):
            yield text[start:]

    def _too_long(self, size: int, unit: str, completion: int) -> RequestError:
        """``size`` in ``unit`` ("characters", "bytes"), or tokens counted so far (``""``)."""
        if unit:
            fewest = -(-size // self.tokenizer.max_token_bytes)
            how = f"{size} {unit}, at least {fewest} tokens"
        else:
            how = f"at least {size} tokens (tokenizing stopped there)"
        return RequestError(
            f"This model's maximum context length is {self.n_ctx} tokens. However, the "
            f"messages come to {how}, and {completion} are asked for the completion. "
            "Please reduce the length of the messages or completion.",
            param="messages",
            code="context_length_exceeded",
        )
