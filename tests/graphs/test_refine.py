"""graphs/refine: each rewrite reads the previous answer.

The fake answers by the reference it sees, never by call order.
"""

from __future__ import annotations

import re

import pytest
from baselines_support import QUESTION

from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graphs.refine import build_refine_graph
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.prompts import render_synthesis

DRAFT_RE = re.compile(r"draft v(\d+)")


def refine_reply(call: FakeCall) -> FakeReply:
    """No reference: draft v0 (7 tokens); a reference 'draft vN': draft vN+1 (20 tokens)."""
    found = DRAFT_RE.findall(call.last_user)
    if not found:
        return FakeReply(content="<think>first try</think>draft v0", completion_tokens=7)
    assert len(found) == 1, "a rewrite must read exactly one previous answer"
    return FakeReply(
        content=f"<think>rewriting</think>draft v{int(found[0]) + 1}", completion_tokens=20
    )


@pytest.mark.parametrize("rewrites", [1, 3])
async def test_refine_rewrites_its_own_previous_answer(rewrites: int) -> None:
    client = FakeChatClient(refine_reply)
    graph = build_refine_graph(client, rewrites)
    result = await ainvoke_pacore(graph, QUESTION)

    assert len(client.calls) == client.requests == rewrites + 1
    assert result.schedule == (1,) * (rewrites + 1)
    assert [len(r) for r in result.rounds] == [1] * (rewrites + 1)
    # Round 0 sees the question; each later round exactly the previous answer,
    # rendered with PaCoRe's synthesis template.
    expected_prompts = {QUESTION} | {
        render_synthesis(QUESTION, [f"draft v{r}"]) for r in range(rewrites)
    }
    assert {c.last_user for c in client.calls} == expected_prompts
    for r, (t,) in enumerate(result.rounds):
        assert t.references == (() if r == 0 else (0,))
        assert t.message == f"draft v{r}"
    assert result.answer == f"draft v{rewrites}"
    assert result.ttc_per_round == (7, *([20] * rewrites))
    assert result.effective_ttc == 7 + 20 * rewrites


async def test_refine_uses_a_custom_synthesis_template() -> None:
    template = (
        "Task: {{ original_prompt }}{% for r in ref_responses %}\nPREVIOUS: {{ r }}{% endfor %}"
    )
    client = FakeChatClient(refine_reply)
    result = await ainvoke_pacore(build_refine_graph(client, 2, template=template), QUESTION)
    assert result.answer == "draft v2"
    rewrites = sorted(c.last_user for c in client.calls if c.last_user != QUESTION)
    assert rewrites == [f"Task: {QUESTION}\nPREVIOUS: draft v{r}" for r in range(2)]


def test_refine_needs_a_rewrite() -> None:
    with pytest.raises(ValueError, match="at least 1 rewrite"):
        build_refine_graph(FakeChatClient(), 0)
