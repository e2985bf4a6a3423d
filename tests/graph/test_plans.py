"""Round plans: the part a method swaps to ask each round what it asks.

The checks (a plan gives one or K prompts, references the previous round
knows) and PaCoRe's own plan as a unit; over real HTTP, that a shared prompt
stays one ``n=K`` request while per-explorer prompts are K requests, each
explorer's references and extras reaching its trajectory and task.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.graph.plans import (
    ExplorerPrompt,
    RoundInput,
    RoundPrompts,
    SynthesisPlan,
    plan_round,
)
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.testing import ScriptedRequest, ScriptedServer
from pacore_graph.values.prompts import select_references, synthesis_messages
from pacore_graph.values.records import Trajectory

PROBLEM = ({"role": "user", "content": "What is 2 + 2?"},)


def done(index: int, message: str | None, *, failed: bool = False) -> Trajectory:
    return Trajectory(
        round=0,
        index=index,
        content=message or "",
        message=None if failed else message,
        error="HTTP 500" if failed else None,
    )


def view(r: int, width: int, rounds: tuple[tuple[Trajectory, ...], ...] = ()) -> RoundInput:
    return RoundInput(problem=PROBLEM, problem_id="p", round=r, width=width, rounds=rounds)


PREVIOUS = ((done(0, "four"), done(1, None, failed=True), done(2, "4, surely")),)


async def test_the_synthesis_plan_is_pacores_round() -> None:
    plan = SynthesisPlan(shuffle_seed=42)
    first = await plan_round(plan, view(0, 3))
    assert first.is_shared and first.prompts[0].messages == PROBLEM and first.reads == ()
    later = await plan_round(plan, view(1, 2, PREVIOUS))
    refs, texts = select_references(PREVIOUS[0], 42, "public")
    (prompt,) = later.prompts
    assert prompt.references == refs and set(refs) == {0, 2}
    assert list(prompt.messages) == synthesis_messages(PROBLEM, texts)
    assert later.reads == tuple(texts)


async def test_a_plan_gives_one_prompt_or_one_per_explorer_and_known_references() -> None:
    def per_explorer(r: RoundInput) -> RoundPrompts:
        return RoundPrompts(
            prompts=tuple(
                ExplorerPrompt(messages=r.problem, references=(0,), extras={"i": i})
                for i in range(r.width)
            )
        )

    async def shared(r: RoundInput) -> RoundPrompts:  # a plan may be async
        return RoundPrompts.shared(r.problem, (2,))

    planned = await plan_round(per_explorer, view(1, 3, PREVIOUS))
    assert [p.extras["i"] for p in planned.prompts] == [0, 1, 2]
    assert planned.reads == ("four",)  # by default: the texts its prompts reference
    assert (await plan_round(shared, view(1, 3, PREVIOUS))).prompt_for(2).references == (2,)
    for bad, error, match in (
        (lambda r: RoundPrompts.shared(r.problem) if False else "x", TypeError, "not RoundPrompts"),
        (
            lambda r: RoundPrompts(prompts=(ExplorerPrompt(messages=r.problem),) * 2),
            ValueError,
            "gave 2 prompts for round 1 of 3 explorers",
        ),
        (lambda r: RoundPrompts.shared(r.problem, (7,)), ValueError, r"references \[7\]"),
        (lambda r: RoundPrompts.shared(()), ValueError, "empty prompt"),
    ):
        with pytest.raises(error, match=match):
            await plan_round(bad, view(1, 3, PREVIOUS))


def by_prompt(req: ScriptedRequest) -> str:
    return f"{req.last_user[:12]} #{req.sample_index} seed={req.seed}"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_prompt).run_in_thread() as srv:
        yield srv


def lenses(r: RoundInput) -> RoundPrompts:
    """Round 0 shared; round 1: each explorer its own lens on one reference."""
    if r.round == 0:
        return RoundPrompts.shared(r.problem)
    prompts = []
    for i in range(r.width):
        ref = r.previous[i % len(r.previous)]
        text = f"lens {i}: check {ref.message!r}"
        prompts.append(
            ExplorerPrompt(
                messages=({"role": "user", "content": text},),
                references=(ref.index,),
                extras={"lens": i},
            )
        )
    return RoundPrompts(prompts=tuple(prompts), note={"lenses": r.width})


async def test_shared_prompts_stay_one_request_and_own_prompts_are_one_each(
    server: ScriptedServer,
) -> None:
    server.reset_log()
    client = OpenAICompatClient(server.base_url, "m")
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[3, 2]), plan=lenses)
    try:
        result = await ainvoke_pacore(graph, "What is 2 + 2?")
    finally:
        await client.aclose()
    sent = [(r.body.get("n", 1), r.body["messages"][-1]["content"][:6]) for r in server.requests]
    # round 0: one n=3 request; round 1: one request per explorer; the final K=1 round too
    assert sent[0] == (3, "What i") and sorted(sent[1:3]) == [(1, "lens 0"), (1, "lens 1")]
    assert sent[3] == (1, "lens 0") and len(sent) == 4
    second = result.rounds[1]
    assert [t.references for t in second] == [(0,), (1,)]
    notes = result.extra["round_control"]
    assert notes == [{"round": 1, "lenses": 2}, {"round": 2, "lenses": 1}]
