"""The model's own chat template, rendered as Hugging Face renders it.

A GGUF file carries the chat template of the model it was converted from
(``tokenizer.chat_template``, Jinja). llama.cpp's C API only pattern-matches
known templates and drops what they add by themselves (SmolLM2's adds a
default system prompt), so the prompt the model was trained on comes from
rendering the Jinja text itself, in a sandbox, with the variables
``transformers`` passes: ``messages``, ``add_generation_prompt``,
``bos_token``, ``eos_token`` and ``raise_exception``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pacore_graph.errors import PaCoReError

__all__ = ["ChatTemplate", "ChatTemplateError"]

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
