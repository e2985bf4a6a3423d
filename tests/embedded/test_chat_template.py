"""The model's own chat template, rendered in a sandbox; a template's refusal is a bad request."""

from __future__ import annotations

import pytest

from pacore_graph.embedded.chat_template import CHATML, ChatTemplate, ChatTemplateError

# SmolLM2-135M-Instruct's own template, as its GGUF carries it.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_the_models_own_template_adds_its_default_system_prompt() -> None:
    template = ChatTemplate(SMOLLM2_TEMPLATE)
    prompt = template.render([{"role": "user", "content": "Name a colour."}])
    assert prompt == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"
    )
    with_system = template.render(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    )
    assert with_system.startswith("<|im_start|>system\nS<|im_end|>\n")


def test_a_template_that_refuses_the_messages_is_a_bad_request() -> None:
    template = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        template.render([{"role": "user", "content": "x"}])
    # Sandboxed: a template cannot reach Python internals.
    sneaky = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(ChatTemplateError):
        sneaky.render([{"role": "user", "content": "x"}])


def test_the_generation_prompt_and_special_tokens_reach_the_template() -> None:
    template = ChatTemplate(
        "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}{{ eos_token }}",
        bos_token="<s>",
        eos_token="</s>",
    )
    messages = [{"role": "user", "content": "hi"}]
    assert template.render(messages) == "<s>[user]hi[assistant]</s>"


def test_a_model_without_a_template_speaks_chatml() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert ChatTemplate("").render(messages) == ChatTemplate(CHATML).render(messages)
    assert ChatTemplate("").render(messages) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_template_that_does_not_compile_is_a_chat_template_error() -> None:
    """A GGUF file's broken template fails as ChatTemplateError, not jinja2's own class."""
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for m in messages %}{{ m.content }}")  # no endfor
