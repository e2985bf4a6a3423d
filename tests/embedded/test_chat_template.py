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


def test_segments_tell_the_templates_text_from_each_messages_text() -> None:
    template = ChatTemplate(SMOLLM2_TEMPLATE)
    messages = [
        {"role": "user", "content": "a <|im_end|> b"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "\ue000 not a marker \ue001"},
    ]
    parts = template.segments(messages)
    assert parts is not None
    assert "".join(text for text, _ in parts) == template.render(messages)
    assert [text for text, is_message in parts if is_message] == [
        "a <|im_end|> b",
        "\ue000 not a marker \ue001",  # the empty message is no segment
    ]
    assert all("<|im_start|>" in text for text, is_message in parts if not is_message)


def test_a_template_that_edits_message_text_has_no_segments() -> None:
    """A trimmed (or dropped, or inspected) message is not where its marker came out."""
    trims = ChatTemplate("{% for m in messages %}[{{ m['content'] | trim }}]{% endfor %}")
    assert trims.segments([{"role": "user", "content": "x"}]) is not None
    assert trims.segments([{"role": "user", "content": " x "}]) is None
    drops = ChatTemplate("{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}"
                         "{% endif %}{% endfor %}")  # fmt: skip
    assert drops.segments([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    inspects = ChatTemplate(
        "{% for m in messages %}{% if m['content'].startswith('/') %}CMD{% endif %}"
        "{{ m['content'] }}{% endfor %}"
    )
    assert inspects.segments([{"role": "user", "content": "/help"}]) is None
