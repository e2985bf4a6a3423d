"""The model's own chat template, rendered as Hugging Face renders it.

A GGUF file carries the chat template of the model it was converted from
(``tokenizer.chat_template``, Jinja). llama.cpp's C API only pattern-matches
known templates and drops what they add by themselves (SmolLM2's adds a
default system prompt), so the prompt the model was trained on comes from
rendering the Jinja text itself, in a sandbox, with the variables
``transformers`` passes: ``messages``, ``add_generation_prompt``,
``bos_token``, ``eos_token`` and ``raise_exception``.

:meth:`ChatTemplate.segments` says which characters of the prompt are the
template's own and which are a message's text, so that a message spelling a
control token (``<|im_end|>``) can be tokenized as the text it is, not as the
marker that ends a turn (:mod:`pacore_graph.embedded.prompt`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pacore_graph.errors import PaCoReError

__all__ = ["ChatTemplate", "ChatTemplateError", "Segment"]

#: A piece of a rendered prompt: its text, and whether it is a message's text
#: (``True``) or the template's own (``False``).
Segment = tuple[str, bool]

#: Used when a GGUF has no template: ChatML, which most small instruct models speak.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ChatTemplateError(PaCoReError):
    """The messages cannot be rendered (the template refused them): a bad request."""


def _raise_exception(message: str) -> NoReturn:
    raise ChatTemplateError(message)


class ChatTemplate:
    """A compiled chat template: :meth:`render` turns messages into the prompt text."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise_exception
        try:
            self._template = env.from_string(source or CHATML)
        except TemplateError as exc:  # a model file's broken template: one clear error
            raise ChatTemplateError(f"the model's chat template does not compile: {exc}") from exc
        self._bos = bos_token
        self._eos = eos_token

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The prompt for ``messages``, ending where the assistant's answer starts."""
        try:
            return self._template.render(
                messages=[dict(m) for m in messages],
                add_generation_prompt=True,
                bos_token=self._bos,
                eos_token=self._eos,
            )
        except ChatTemplateError:
            raise
        except TemplateError as exc:
            raise ChatTemplateError(
                f"the chat template cannot render these messages: {exc}"
            ) from exc

    def segments(self, messages: Sequence[Mapping[str, Any]]) -> list[Segment] | None:
        """The prompt of :meth:`render` cut into the template's text and each message's text.

        The template is rendered once more with each message's content replaced
        by a marker no client can guess; the messages' texts then go where the
        markers came out. ``None`` when that is not the prompt :meth:`render`
        gives (the template edits, drops or branches on message text, as one
        that trims it does): the two kinds of text cannot be told apart there.
        """
        nonce = secrets.token_hex(16)
        marker = re.compile("\ue000" + nonce + r"(\d+)\ue001")
        marked = [
            {**message, "content": f"\ue000{nonce}{index}\ue001"}
            for index, message in enumerate(messages)
        ]
        rendered = self.render(marked)
        parts: list[Segment] = []
        end = 0
        for found in marker.finditer(rendered):
            index = int(found.group(1))
            if index >= len(messages):
                return None
            parts.append((rendered[end : found.start()], False))
            parts.append((str(messages[index]["content"]), True))
            end = found.end()
        parts.append((rendered[end:], False))
        if "".join(text for text, _ in parts) != self.render(messages):
            return None
        return [part for part in parts if part[0]]
