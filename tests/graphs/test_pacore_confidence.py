"""PaCoRe with confidence (graphs/pacore_confidence.py), over real HTTP on the scripted server."""

from __future__ import annotations

import re
from typing import Any

from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.graphs.pacore_confidence import (
    build_pacore_confidence_graph,
    build_pacore_for_config,
    wants_confidence,
)
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

BASE = 300
SYNTHESIS = "You are given a problem and a list of reference responses."


def by_trace(answers: dict[int, tuple[int, float]]) -> object:
    """Round-0 trace i (seed + index) says answers[i] = (answer, confidence); synthesis says 9."""

    def reply(req: ScriptedRequest) -> ScriptedReply:
        if req.last_user.startswith(SYNTHESIS):
            return ScriptedReply(content="So \\boxed{9}", confidence=2.0)
        answer, conf = answers[(req.seed or 0) + req.sample_index - BASE]
        return ScriptedReply(content=f"trace says \\boxed{{{answer}}}", confidence=conf)

    return reply


async def run(graph_of: object, answers: dict[int, tuple[int, float]]) -> tuple[object, str]:
    async with ScriptedServer(by_trace(answers)) as srv:  # type: ignore[arg-type]
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        result = await ainvoke_pacore(graph_of(client), "Q?")  # type: ignore[operator]
        await client.aclose()
        last = srv.requests[-1].body["messages"][-1]["content"]
    return result, last


async def test_the_reference_filter_passes_on_only_the_most_confident_share() -> None:
    answers = {0: (1, 3.0), 1: (2, 1.0), 2: (3, 2.0), 3: (4, 4.0)}
    config = PaCoReConfig(rounds=[4], sampling=SamplingParams(seed=BASE))
    filtered, prompt = await run(
        lambda c: build_pacore_confidence_graph(
            c, config=config, reference_filter="confidence:0.5", window=4
        ),
        answers,
    )
    _, plain_prompt = await run(lambda c: build_pacore_graph(c, config=config), answers)
    assert len(re.findall(r"Reference \d+:", prompt)) == 2
    assert len(re.findall(r"Reference \d+:", plain_prompt)) == 4
    assert "boxed{1}" in prompt and "boxed{4}" in prompt and "boxed{2}" not in prompt
    (note,) = filtered.extra["round_control"]  # type: ignore[attr-defined]
    assert note == {"round": 1, "reference_filter": "confidence:0.5", "passed": ["r0.0", "r0.3"]}
    assert sorted(filtered.rounds[1][0].references) == [0, 3]  # type: ignore[attr-defined]


async def test_early_stop_can_weigh_votes_by_confidence() -> None:
    # Three unsure traces say 7, one sure trace says 4: counted, 7 has 3/4; weighed, 4 has 5/8.
    answers = {0: (7, 1.0), 1: (7, 1.0), 2: (7, 1.0), 3: (4, 5.0)}
    config = PaCoReConfig(
        rounds=[4, 2], sampling=SamplingParams(seed=BASE), early_stop_consensus=0.6
    )
    weighed, _ = await run(
        lambda c: build_pacore_confidence_graph(
            c, config=config, consensus_by_confidence=True, window=4
        ),
        answers,
    )
    counted, _ = await run(lambda c: build_pacore_confidence_graph(c, config=config), answers)
    assert weighed.extra["early_stop"]["answer"] == "4"  # type: ignore[attr-defined]
    assert weighed.extra["early_stop"]["share"] == 0.625  # type: ignore[attr-defined]
    assert counted.extra["early_stop"]["answer"] == "7"  # type: ignore[attr-defined]


async def bodies_of(graph_of: Any, answers: dict[int, tuple[int, float]]) -> list[Any]:
    """The request bodies one run of ``graph_of(client)`` sends."""
    async with ScriptedServer(by_trace(answers)) as srv:  # type: ignore[arg-type]
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        await ainvoke_pacore(graph_of(client), "Q?")
        await client.aclose()
        return [r.body for r in srv.requests]


async def test_the_config_picks_the_graph_plain_unless_it_asks_for_confidence() -> None:
    answers = {0: (1, 3.0), 1: (2, 1.0), 2: (3, 2.0), 3: (4, 4.0)}
    plain = PaCoReConfig(rounds=[4], sampling=SamplingParams(seed=BASE))
    filtered = plain.with_settings({"reference_filter": "confidence:0.5"})
    # A confidence weight without an early stop weighs nothing: still the plain graph.
    idle_weight = plain.with_settings({"consensus_weight": "confidence"})
    assert not wants_confidence(plain) and not wants_confidence(idle_weight)
    assert wants_confidence(filtered)
    assert wants_confidence(
        plain.with_settings({"consensus_weight": "confidence", "early_stop_consensus": 0.6})
    )
    for config, confident in ((plain, False), (idle_weight, False), (filtered, True)):
        bodies = await bodies_of(
            lambda c, cfg=config: build_pacore_for_config(c, config=cfg), answers
        )
        assert all(bool(b.get("logprobs")) is confident for b in bodies), config
        synthesis = bodies[-1]["messages"][-1]["content"]
        refs = len(re.findall(r"Reference \d+:", synthesis))
        assert refs == (2 if confident else 4)
        assert ("top_logprobs" in bodies[0]) is confident


async def test_the_filter_comes_from_the_config_and_the_template_is_honoured() -> None:
    answers = {0: (1, 3.0), 1: (2, 1.0), 2: (3, 2.0), 3: (4, 4.0)}
    template = (
        "You are given a problem and a list of reference responses. MINE\n"
        "{{ original_prompt }}\n"
        "{% for ref in ref_responses %}Reference {{ loop.index }}: {{ ref }}\n{% endfor %}"
    )
    config = PaCoReConfig(
        rounds=[4], sampling=SamplingParams(seed=BASE), reference_filter="confidence:0.5"
    )
    result, prompt = await run(
        lambda c: build_pacore_confidence_graph(c, config=config, template=template), answers
    )
    assert "MINE" in prompt and len(re.findall(r"Reference \d+:", prompt)) == 2
    (note,) = result.extra["round_control"]  # type: ignore[attr-defined]
    assert note["reference_filter"] == "confidence:0.5"
