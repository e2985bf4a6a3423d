"""The synthesis prompt on the wire is the public pipeline's, byte for byte.

A real graph over HTTP against the scripted server, whose model inlines its
thinking as ``<think>..</think>`` in ``content`` (a server without a reasoning
parser): the raw contents and the conclusions order differently, one explorer
fails and one concludes with nothing. The final round's prompt must be what
the public pipeline renders from the same responses.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.prompts import render_synthesis

QUESTION = "What is 54 - 6?"
FAST_RETRY = ModelRetryPolicy(max_attempts=1, initial_backoff=0.001, max_backoff=0.01)
# seed -> (reasoning, conclusion): raw lengths 100 < 101 < 102 < 104 order by reasoning,
# conclusions the other way; seed 103 fails, seed 105 thinks and concludes nothing.
SCRIPT = {
    100: ("r" * 60, "short"),
    101: ("r" * 10, "a much longer conclusion of this explorer"),
    102: ("r" * 30, "medium conclusion here"),
    104: ("r" * 80, "tiny"),
    105: ("r" * 90, ""),
}


def respond(req: ScriptedRequest) -> ScriptedReply:
    if req.seed is not None and req.seed >= 1000:
        return ScriptedReply(content="48", reasoning="final")
    reasoning, conclusion = SCRIPT[req.seed or 0]
    return ScriptedReply(content=conclusion, reasoning=reasoning)


def public_rule(contents: list[str], seed: int) -> list[str]:
    """pacore/batch_inference/base_exp.py: sort by raw length, shuffle, drop empty, parse."""
    responses = sorted(contents, key=len)
    random.Random(seed).shuffle(responses)
    return [c.split("</think>")[-1] if "</think>" in c else c for c in responses if c]


def final_prompt(srv: ScriptedServer) -> str:
    bodies: list[dict[str, Any]] = [r.body for r in srv.requests if r.body.get("seed", 0) >= 1000]
    assert len(bodies) == 1
    return str(bodies[0]["messages"][-1]["content"])


@pytest.mark.parametrize("order", ["public", "compacted"])
async def test_final_prompt_follows_the_reference_order(order: str) -> None:
    def fail_103(req: ScriptedRequest) -> int | None:
        return 500 if req.seed == 103 else None

    async with ScriptedServer(respond, reasoning_mode="think", fail_when=fail_103) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=FAST_RETRY)
        config = PaCoReConfig(
            rounds=[6],
            batch_samples=False,
            sampling={"seed": 100},
            retry=FAST_RETRY,
            reference_order=order,  # type: ignore[arg-type]
        )
        try:
            result = await ainvoke_pacore(build_pacore_graph(client, config=config), QUESTION)
        finally:
            await client.aclose()
        prompt = final_prompt(srv)
    round0 = result.rounds[0]
    assert [t.failed for t in round0] == [False, False, False, True, False, False]
    raw = ["" if t.failed else t.content for t in round0]
    assert raw[0].startswith("<think>")  # inline thinking: raw content != conclusion
    assert raw[5].startswith("<think>") and not raw[5].split("</think>")[-1].strip()
    if order == "public":
        expected = public_rule(raw, 42)
        assert len(expected) == 5 and any(not text.strip() for text in expected)
    else:
        messages = [t.message for t in round0 if t.message]
        by_length = sorted(messages, key=len)
        random.Random(42).shuffle(by_length)
        expected = by_length
        assert expected != public_rule(raw, 42)  # the two rules differ on this round
    assert prompt == render_synthesis(QUESTION, expected)
    assert [round0[i].message for i in result.rounds[1][0].references] == expected
