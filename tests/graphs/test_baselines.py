"""The baseline graphs (single, majority, refine) count effective TTC as PaCoRe does."""

from __future__ import annotations

from baselines_support import QUESTION, is_synthesis

from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.graphs.refine import build_refine_graph
from pacore_graph.graphs.single import build_single_graph
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply


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
