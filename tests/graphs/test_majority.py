"""graphs/majority: K samples and a vote, never a synthesis call.

The fake answers by sample index and seed, never by call order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from baselines_support import BASE_SEED, QUESTION, is_synthesis

from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.aggregation import extract_final_answer
from pacore_graph.values.records import Completion


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
