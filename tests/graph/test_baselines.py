"""Baseline graphs (single, majority, refine) over the in-process fake chat client.

Replies are a function of the request (the prompt, ``sample_index``, ``seed``),
never of call order, so which explorer finishes first cannot change a result.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pacore_graph.graph.aggregation import extract_final_answer
from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.graph.prompts import render_synthesis
from pacore_graph.graph.records import Completion
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.graphs.refine import build_refine_graph
from pacore_graph.graphs.single import build_single_graph
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

QUESTION = "What is 6 times 7?"
SYNTHESIS_START = "You are given a problem and a list of reference responses."
BASE_SEED = 100


def is_synthesis(call: FakeCall) -> bool:
    return call.last_user.startswith(SYNTHESIS_START)


# --------------------------------------------------------------------------- single


async def test_single_makes_one_call_and_returns_its_answer() -> None:
    client = FakeChatClient(
        lambda call: FakeReply(
            content="<think>6*7 is 42</think>It is \\boxed{42}", completion_tokens=13
        )
    )
    graph = build_single_graph(client)
    out = await graph.ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
    result = out["result"]
    assert client.requests == 1 and len(client.calls) == 1
    assert client.calls[0].last_user == QUESTION
    assert out["answer"] == result.answer == "It is \\boxed{42}"
    assert out["messages"][-1].content == "It is \\boxed{42}"
    assert result.schedule == (1,)
    assert [len(r) for r in result.rounds] == [1]
    assert result.effective_ttc == 13
    assert result.extra["aggregator"] == "first"
    assert result.final.id == result.extra["chosen"] == "r0.0"


# --------------------------------------------------------------------------- majority


def majority_by_sample(call: FakeCall) -> FakeReply:
    """Samples 0, 2, 4 agree on 7 (identical text), 1 says 3, 3 says 5; 10 + i tokens."""
    assert not is_synthesis(call), "a majority vote must not synthesise"
    text = {1: "Hmm, \\boxed{3}", 3: "I get \\boxed{5}"}.get(call.sample_index, "So \\boxed{7}")
    return FakeReply(content=text, completion_tokens=10 + call.sample_index)


async def test_majority_samples_k_and_votes_without_a_synthesis_call() -> None:
    client = FakeChatClient(majority_by_sample)
    graph = build_majority_graph(client, 5)
    result = await ainvoke_pacore(graph, QUESTION)

    assert len(client.calls) == 5
    assert sorted(c.sample_index for c in client.calls) == [0, 1, 2, 3, 4]
    assert all(c.last_user == QUESTION for c in client.calls)  # no synthesis prompt
    assert result.schedule == (5,)
    assert [len(r) for r in result.rounds] == [5]

    assert result.answer == "So \\boxed{7}"
    assert result.extra["votes"] == {"7": 3, "3": 1, "5": 1}
    assert result.extra["winner"] == "7"
    assert result.extra["tie"] is False
    assert result.extra["aggregator"] == "majority"
    # The chosen trajectory is the lowest-index one that voted for the winner.
    first_seven = min(
        (t for t in result.rounds[0] if extract_final_answer(t.content) == "7"),
        key=lambda t: t.index,
    )
    assert result.extra["chosen"] == first_seven.id
    assert result.final is first_seven
    assert result.final.message == result.answer
    # Effective TTC as PaCoRe counts it: the sum of all completion tokens.
    assert result.effective_ttc == sum(10 + i for i in range(5)) == 60


class ReversedLatency:
    """Later explorers (higher seed) answer first, to show ties do not follow finish order."""

    def __init__(self, inner: FakeChatClient) -> None:
        self.inner = inner
        self.model = inner.model

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]:
        assert seed is not None
        await asyncio.sleep(0.002 * (10 - (seed - BASE_SEED)))
        return await self.inner.complete(messages, n=n, params=params, seed=seed)


def by_seed(answers: Sequence[int]) -> FakeChatClient:
    """Explorer i (told apart by its seed, batching off) answers ``answers[i]``."""

    def reply(call: FakeCall) -> FakeReply:
        assert call.seed is not None and call.n == 1
        i = call.seed - BASE_SEED
        return FakeReply(content=f"explorer {i} says \\boxed{{{answers[i]}}}", completion_tokens=4)

    return FakeChatClient(reply)


UNBATCHED = PaCoReConfig(sampling=SamplingParams(seed=BASE_SEED), batch_samples=False)


@pytest.mark.parametrize(
    ("answers", "winner", "chosen"),
    [
        ([9, 4, 4, 9], "9", 0),  # 2-2: explorer 0 gave 9 first
        ([1, 4, 9, 9, 4], "4", 1),  # 4 and 9 tie at 2; 4 was first given by explorer 1
    ],
)
async def test_majority_tie_is_broken_by_lowest_explorer_index(
    answers: list[int], winner: str, chosen: int
) -> None:
    for _ in range(2):  # the same verdict every time
        fake = by_seed(answers)
        graph = build_majority_graph(ReversedLatency(fake), len(answers), config=UNBATCHED)
        result = await ainvoke_pacore(graph, QUESTION)
        assert sorted(c.seed for c in fake.calls) == [BASE_SEED + i for i in range(len(answers))]
        assert result.extra["tie"] is True
        assert result.extra["winner"] == winner
        assert result.extra["chosen"] == f"r0.{chosen}"
        assert result.answer == f"explorer {chosen} says \\boxed{{{winner}}}"
        assert result.final.index == chosen


async def test_majority_ignores_failed_explorers() -> None:
    answers = [5, 8, 8, 5, 5]

    def reply(call: FakeCall) -> FakeReply:
        i = (call.seed or 0) - BASE_SEED
        if i in (0, 3):  # two of the three 5s fail
            return FakeReply(content="", error="HTTP 500")
        return FakeReply(content=f"explorer {i}: \\boxed{{{answers[i]}}}", completion_tokens=3)

    graph = build_majority_graph(FakeChatClient(reply), 5, config=UNBATCHED)
    result = await ainvoke_pacore(graph, QUESTION)
    assert result.failures == 2
    assert result.extra["votes"] == {"8": 2, "5": 1}
    assert result.answer == "explorer 1: \\boxed{8}"
    assert result.effective_ttc == 9  # failed calls reported no tokens


@pytest.mark.parametrize("k", [0, 1025])
def test_majority_with_invalid_k_fails_at_build_time(k: int) -> None:
    client = FakeChatClient()
    with pytest.raises(ValueError, match=r"\[1, 1024\]"):
        build_majority_graph(client, k)
    assert client.calls == []


# --------------------------------------------------------------------------- refine

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


# --------------------------------------------------------------------------- matched TTC


def tokens_by_prompt(call: FakeCall) -> FakeReply:
    """Explorers: 'answer i' with 5 + i tokens; synthesis: 100 tokens."""
    if is_synthesis(call):
        return FakeReply(content="synthesised \\boxed{1}", completion_tokens=100)
    return FakeReply(content=f"answer {call.sample_index}", completion_tokens=5 + call.sample_index)


async def test_baselines_count_effective_ttc_like_pacore() -> None:
    pacore = await ainvoke_pacore(
        build_pacore_graph(FakeChatClient(tokens_by_prompt), config={"rounds": [4]}), QUESTION
    )
    majority = await ainvoke_pacore(
        build_majority_graph(FakeChatClient(tokens_by_prompt), 4), QUESTION
    )
    single = await ainvoke_pacore(build_single_graph(FakeChatClient(tokens_by_prompt)), QUESTION)
    refine = await ainvoke_pacore(build_refine_graph(FakeChatClient(tokens_by_prompt), 1), QUESTION)

    assert pacore.ttc_per_round == (5 + 6 + 7 + 8, 100)
    assert pacore.effective_ttc == 126
    # Majority:4 is PaCoRe's first round without the synthesis round.
    assert majority.ttc_per_round == (pacore.ttc_per_round[0],)
    assert majority.effective_ttc == 26
    assert single.effective_ttc == 5
    assert refine.ttc_per_round == (5, 100)
    for result in (pacore, majority, single, refine):
        assert result.effective_ttc == sum(t.completion_tokens for t in result.trajectories)
        assert result.to_dict()["effective_ttc"] == result.effective_ttc
