"""The synthesis prompt is the protocol text byte for byte, rendered like the public pipeline."""

from __future__ import annotations

import jinja2
import pytest

from pacore_graph.prompts import (
    SYNTHESIS_TEMPLATE,
    order_references,
    render_synthesis,
    synthesis_messages,
)

# The text as printed in the paper's public pipeline (pacore/batch_inference/base_exp.py).
PROTOCOL_TEXT = (
    "You are given a problem and a list of reference responses. Your job is to analyze these "
    "references and provide your own response.\n\nOriginal Problem:\n{{ original_prompt }}\n\n"
    "Reference Responses:\n{% for response in ref_responses %}\nReference {{ loop.index }}:\n"
    "{{ response }}\n{% endfor %}\n\nNow, based on the original problem and reference responses "
    "above, please provide your own comprehensive solution.\n"
)


def test_template_is_the_protocol_text_byte_for_byte() -> None:
    assert SYNTHESIS_TEMPLATE == PROTOCOL_TEXT


def test_rendering_matches_plain_jinja2_defaults() -> None:
    refs = ["first answer", "second\nmulti-line answer", "3"]
    expected = jinja2.Template(PROTOCOL_TEXT).render(original_prompt="Q?", ref_responses=refs)
    assert render_synthesis("Q?", refs) == expected
    assert render_synthesis("Q?", refs) == (
        "You are given a problem and a list of reference responses. Your job is to analyze these "
        "references and provide your own response.\n\nOriginal Problem:\nQ?\n\n"
        "Reference Responses:\n\nReference 1:\nfirst answer\n\nReference 2:\nsecond\n"
        "multi-line answer\n\nReference 3:\n3\n\n\nNow, based on the original problem and "
        "reference responses above, please provide your own comprehensive solution."
    )


def test_last_user_message_is_replaced_and_earlier_messages_kept() -> None:
    convo = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "What is 6*7?"},
    ]
    out = synthesis_messages(convo, ["42", "41"])
    assert out[:3] == convo[:3]
    assert out[3]["role"] == "user"
    assert out[3]["content"] == render_synthesis("What is 6*7?", ["42", "41"])
    assert convo[3]["content"] == "What is 6*7?"  # the input is not mutated


def test_custom_template() -> None:
    out = synthesis_messages(
        [{"role": "user", "content": "x"}],
        ["a", "b"],
        template="P={{ original_prompt }} R={{ ref_responses|join('|') }}",
    )
    assert out[0]["content"] == "P=x R=a|b"


def test_no_user_message_is_an_error() -> None:
    with pytest.raises(ValueError, match="no user message"):
        synthesis_messages([{"role": "system", "content": "s"}], ["a"])


def test_shuffle_is_deterministic_and_independent_of_arrival_order() -> None:
    msgs = ["aaaa", "b", "ccc", "dd", "eeeee", "ffffff"]
    order = order_references(msgs, seed=42)
    assert order == order_references(msgs, seed=42)
    assert sorted(order) == list(range(len(msgs)))
    # The same messages arriving in another order are shown in the same order.
    permuted = [msgs[i] for i in (5, 3, 1, 0, 2, 4)]
    shown = [msgs[i] for i in order]
    assert [permuted[i] for i in order_references(permuted, seed=42)] == shown
    assert order_references(msgs, seed=None) == list(range(len(msgs)))
    assert {tuple(order_references(msgs, seed=s)) for s in range(20)} != {tuple(order)}
