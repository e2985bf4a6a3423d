"""The embedded server's request checks, chat template and stop-string logic (no model needed)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from pacore_graph.embedded import DEFAULT_MAX_SEQUENCES
from pacore_graph.embedded.chat_template import ChatTemplate, ChatTemplateError
from pacore_graph.embedded.engine import BatchEngine, _Sequence
from pacore_graph.embedded.protocol import RequestError, parse_request
from pacore_graph.settings.options import EMBEDDED_MAX_CONCURRENCY

# SmolLM2-135M-Instruct's own template, as its GGUF carries it.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_OK: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}


def test_a_plain_request_is_accepted_with_openai_defaults() -> None:
    request = parse_request({**_OK, "model": "anything", "max_tokens": 5}, max_n=8)
    assert (request.n, request.temperature, request.top_p) == (1, 1.0, 1.0)
    assert request.token_cap() == 5
    assert request.stop_strings() == ()
    newer = parse_request({**_OK, "max_completion_tokens": 7, "stop": "x"}, max_n=8)
    assert newer.token_cap() == 7
    assert newer.stop_strings() == ("x",)


def test_text_parts_are_joined_and_developer_is_a_system_message() -> None:
    request = parse_request(
        {
            "messages": [
                {"role": "developer", "content": "be brief"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ]
        },
        max_n=1,
    )
    assert [m.for_template() for m in request.messages] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "ab"},
    ]


@pytest.mark.parametrize(
    ("extra", "param", "fragment"),
    [
        ({"n": 9}, "n", "at most 8"),
        ({"n": 0}, "n", "greater than or equal to 1"),
        ({"tools": []}, "tools", "Unrecognized request argument supplied: tools"),
        ({"logprobs": True}, "logprobs", "not supported"),
        ({"top_p": 0}, "top_p", "greater than 0"),
        ({"stop": [""]}, "stop", "must not be empty"),
        ({"stream_options": {"foo": True}}, "stream_options.foo", "Unrecognized"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, None, None),
    ],
)
def test_bad_fields_are_one_line_errors_naming_the_parameter(
    extra: dict[str, Any], param: str | None, fragment: str | None
) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({**_OK, **extra}, max_n=8)
    error = caught.value.body()["error"]
    assert error["type"] == "invalid_request_error"
    assert "\n" not in error["message"]
    if param is not None:
        assert error["param"] == param
    if fragment is not None:
        assert fragment in error["message"]


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(RequestError, match="JSON object"):
        parse_request([_OK], max_n=8)


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


def _seq(text: str, stop: tuple[str, ...], emitted: int = 0) -> _Sequence:
    return _Sequence(
        index=0, slot=0, sampler=None, max_new=10, stop=stop, text=text, emitted=emitted
    )


def test_text_that_may_begin_a_stop_string_is_held_back() -> None:
    assert BatchEngine._held_back(_seq("Hello wor", ("world",))) == 3
    assert BatchEngine._held_back(_seq("Hello", ("world",))) == 0
    assert BatchEngine._held_back(_seq("ab", ("bc", "abx"))) == 2
    assert BatchEngine._stop_at(_seq("Hello world!", ("world",))) == 6
    assert BatchEngine._stop_at(_seq("Hello wor", ("world",))) is None
    # A stop string split over two events is found from before the emitted point.
    assert BatchEngine._stop_at(_seq("say END now", ("END",), emitted=5)) == 4


def test_embedded_runs_never_ask_for_more_sequences_than_the_server_decodes() -> None:
    assert EMBEDDED_MAX_CONCURRENCY <= DEFAULT_MAX_SEQUENCES


def test_model_serve_takes_an_optional_folder() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pacore_graph.cli", "model", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[model_dir]" in proc.stdout
    assert "embedded" in proc.stdout
