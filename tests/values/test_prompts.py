"""The synthesis prompt is the protocol text byte for byte, rendered like the public pipeline."""

from __future__ import annotations

import random
from dataclasses import replace

import jinja2
import pytest

from pacore_graph.values.compaction import ConclusionCompactor
from pacore_graph.values.prompts import (
    SYNTHESIS_TEMPLATE,
    order_references,
    render_synthesis,
    select_references,
    synthesis_messages,
)
from pacore_graph.values.records import Trajectory

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


# --------------------------------------------------------------------------- reference order


def public_pipeline_references(contents: list[str | None], seed: int) -> list[str]:
    """The public pipeline's rule, transcribed from pacore/batch_inference/base_exp.py.

    ``None`` is a failed call, which the pipeline records as empty content.
    """
    responses = [{"content": c if c is not None else ""} for c in contents]
    responses.sort(key=lambda x: len(x["content"]))
    random.Random(seed).shuffle(responses)

    def parse_answer(response: str) -> str:
        splits = response.split("</think>")
        return splits[-1] if len(splits) > 1 else response

    return [parse_answer(r["content"]) for r in responses if r.get("content")]


def round_of(contents: list[str | None]) -> list[Trajectory]:
    out = []
    for i, content in enumerate(contents):
        if content is None:
            out.append(Trajectory(round=0, index=i, error="HTTP 500"))
        else:
            t = Trajectory(round=0, index=i, content=content)
            out.append(replace(t, message=ConclusionCompactor().compact(t)))
    return out


def test_public_order_matches_the_public_pipeline_on_a_hand_made_round() -> None:
    # Raw lengths order these as 2 < 0 < 3 < 4, conclusions as 3 < 0 < 4 < 2:
    # the two rules must be told apart. Index 1 failed, index 3 has an empty conclusion.
    contents: list[str | None] = [
        "<think>abcdef</think>mid answer",
        None,
        "long conclusion text, no thinking",
        "<think>a very long chain of thought with many words in it</think>",
        "<think>reasoning, reasoning and more reasoning here</think>x = 12",
    ]
    trajectories = round_of(contents)
    for seed in range(40):
        refs, texts = select_references(trajectories, seed, "public")
        assert texts == public_pipeline_references(contents, seed)
        assert "" in texts  # the empty conclusion stays an empty reference
        assert 1 not in refs  # the failed call is never shown
        assert [trajectories[i].message for i in refs] == texts


def test_public_order_matches_the_public_pipeline_on_random_rounds() -> None:
    rng = random.Random(7)
    differs = 0
    for trial in range(300):
        k = rng.randint(1, 9)
        contents: list[str | None] = []
        for _ in range(k):
            kind = rng.random()
            think = "<think>" + "t" * rng.randint(0, 40) + "</think>"
            body = "c" * rng.randint(0, 30)
            if kind < 0.15:
                contents.append(None)
            elif kind < 0.25:
                contents.append(think)  # empty conclusion
            elif kind < 0.35:
                contents.append(body)  # no thinking at all (possibly empty content)
            else:
                contents.append(think + body)
        seed = rng.randint(0, 10_000)
        trajectories = round_of(contents)
        _, texts = select_references(trajectories, seed, "public")
        assert texts == public_pipeline_references(contents, seed), (trial, contents, seed)
        _, compacted = select_references(trajectories, seed, "compacted")
        differs += compacted != texts
    assert differs > 100  # the option really is a different rule


def test_public_order_ignores_the_order_trajectories_arrive_in() -> None:
    contents: list[str | None] = ["<think>aaaa</think>1", "b", None, "<think>c</think>22"]
    trajectories = round_of(contents)
    assert select_references(trajectories[::-1], 42) == select_references(trajectories, 42)


def test_compacted_order_is_the_earlier_rule() -> None:
    contents: list[str | None] = ["<think>abc</think>long one", None, "<think>x</think>", "mid"]
    trajectories = round_of(contents)
    refs, texts = select_references(trajectories, 42, "compacted")
    assert sorted(refs) == [0, 3]  # failed and empty messages dropped before the shuffle
    usable = ["long one", "mid"]
    assert texts == [usable[i] for i in order_references(usable, 42)]


def test_no_seed_keeps_explorer_order_and_bad_order_is_an_error() -> None:
    trajectories = round_of(["<think>a</think>one", None, "two", "<think>b</think>"])
    assert select_references(trajectories, None) == ((0, 2, 3), ["one", "two", ""])
    with pytest.raises(ValueError, match="reference order must be one of public, compacted"):
        select_references(trajectories, 1, "sorted")  # type: ignore[arg-type]
