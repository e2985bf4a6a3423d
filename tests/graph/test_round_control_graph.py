"""Straggler control, early stop and the token budget in the whole graph, over real HTTP.

Slow explorers are made slow by input (their seed), never by call order, so
which explorers a quorum or deadline cuts is fixed by the test.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.cli import main
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import (
    LengthModel,
    ScriptedReply,
    ScriptedRequest,
    ScriptedServer,
    ThroughputServer,
)
from pacore_graph.values.records import PaCoReResult

FAST_RETRY = ModelRetryPolicy(max_attempts=1)
SLOW_S = 2.0


async def slow_by_seed(req: ScriptedRequest) -> ScriptedReply:
    """Explorers 0 and 1 of each round answer at once; the others take SLOW_S seconds.

    Sample j of an ``n``-sample request stands for seed + j (pacore_graph.values.seeds).
    """
    seed = (req.seed or 0) + req.sample_index
    if seed % 1000 >= 2:
        await asyncio.sleep(SLOW_S)
    return ScriptedReply(content=f"explorer {seed % 1000} says \\boxed{{{seed % 1000}}}")


def agreeing(req: ScriptedRequest) -> ScriptedReply:
    """Every first-round explorer agrees; synthesis rounds answer differently (by sample)."""
    if "Reference" in req.last_user:
        return ScriptedReply(content=f"synthesis {req.sample_index}: \\boxed{{{req.sample_index}}}")
    return ScriptedReply(content="I am sure: \\boxed{4}", completion_tokens=50)


def disagreeing(req: ScriptedRequest) -> ScriptedReply:
    return ScriptedReply(content=f"maybe \\boxed{{{req.sample_index}}}")


def hundred_tokens(req: ScriptedRequest) -> ScriptedReply:
    return ScriptedReply(content=f"answer {req.sample_index}", completion_tokens=100)


async def run(base_url: str, model: str = "scripted", **config: Any) -> PaCoReResult:
    config.setdefault("retry", FAST_RETRY)
    client = OpenAICompatClient(base_url, model, retry=config["retry"])
    try:
        graph = build_pacore_graph(client, config=PaCoReConfig(**config))
        return await ainvoke_pacore(graph, "What is 2 + 2?")
    finally:
        await client.aclose()


# ----------------------------------------------------------------- straggler control


async def test_quorum_closes_the_round_and_records_the_rest_as_dropped() -> None:
    async with ScriptedServer(slow_by_seed) as srv:
        result = await run(
            srv.base_url, rounds=[4], round_quorum=0.5, sampling=SamplingParams(seed=0)
        )
        sent = [r.body.get("n") for r in srv.requests]
    assert [len(r) for r in result.rounds] == [2, 1]
    assert [t.index for t in result.rounds[0]] == [0, 1]
    assert result.failures == 0  # dropped is not failed
    assert result.extra["round_control"] == [
        {"round": 0, "planned": 4, "width": 4, "finished": 2, "dropped": [2, 3],
         "closed_by": "quorum 2/4"},
        {"round": 1, "planned": 1, "width": 1, "finished": 1, "dropped": []},
    ]  # fmt: skip
    assert result.extra["widths_run"] == [2, 1]
    # Still one n=K request for the round: streamed, so each sample arrives on its own.
    assert sent == [4, None]
    assert [bool(r.body.get("stream")) for r in srv.requests] == [True, False]


async def test_deadline_closes_the_round_after_s_seconds() -> None:
    async with ScriptedServer(slow_by_seed) as srv:
        result = await run(
            srv.base_url, rounds=[5], round_deadline=0.3, sampling=SamplingParams(seed=0)
        )
    note = result.extra["round_control"][0]
    assert note["dropped"] == [2, 3, 4] and note["closed_by"] == "deadline 0.3s"
    assert [len(r) for r in result.rounds] == [2, 1]


async def test_dropped_explorers_are_cancelled_upstream() -> None:
    lengths = LengthModel(median=300, sigma=1.5)
    async with ThroughputServer(throughput=4000, per_sequence_cap=1000, lengths=lengths) as srv:
        result = await run(srv.base_url, "throughput", rounds=[8], round_quorum=3)
        stats: dict[str, Any] = {}
        for _ in range(100):  # the server notices the disconnects shortly after
            async with aiohttp.ClientSession() as s, s.get(srv.base_url + "/stats") as resp:
                stats = await resp.json()
            if stats["in_flight"] == 0:
                break
            await asyncio.sleep(0.05)
    dropped = result.extra["round_control"][0]["dropped"]
    assert 1 <= len(dropped) <= 5 and len(result.rounds[0]) + len(dropped) == 8
    assert stats["cancelled"] == len(dropped)  # the server stopped decoding them
    assert stats["completed"] == len(result.rounds[0]) + 1


# ----------------------------------------------------------------- early stop


async def test_early_stop_answers_with_the_majority_and_records_the_saving() -> None:
    async with ScriptedServer(agreeing) as srv:
        result = await run(srv.base_url, rounds=[4, 2], early_stop_consensus=0.75)
        requests = len(srv.requests)
    assert [len(r) for r in result.rounds] == [4]
    assert result.answer == "I am sure: \\boxed{4}"
    stop = result.extra["early_stop"]
    assert stop["round"] == 0 and stop["answer"] == "4" and stop["share"] == 1.0
    assert stop["skipped_widths"] == [2, 1] and stop["tokens_saved_estimate"] == 150
    assert result.final.id == stop["chosen"]
    assert requests == 1


async def test_no_early_stop_without_consensus() -> None:
    async with ScriptedServer(disagreeing) as srv:
        result = await run(srv.base_url, rounds=[4, 2], early_stop_consensus=0.6)
    assert [len(r) for r in result.rounds] == [4, 2, 1]
    assert "early_stop" not in result.extra


# ----------------------------------------------------------------- token budget


async def test_token_budget_shrinks_later_rounds_and_records_why() -> None:
    async with ScriptedServer(hundred_tokens) as srv:
        result = await run(srv.base_url, rounds=[8, 4], token_budget=1100)
        widths = [r.body.get("n", 1) for r in srv.requests]
    # 8 x 100 spent; 4 more + 1 final would reach 1,300 > 1,100: K 4 -> 2.
    assert [len(r) for r in result.rounds] == [8, 2, 1]
    assert widths == [8, 2, 1]
    note = result.extra["round_control"][0]
    assert note["round"] == 1 and note["planned"] == 4 and note["width"] == 2
    assert "K 4 -> 2" in note["width_reason"]
    assert result.extra["widths_run"] == [8, 2, 1]
    assert result.effective_ttc == 1100


async def test_a_budget_that_fits_changes_nothing() -> None:
    async with ScriptedServer(hundred_tokens) as srv:
        result = await run(srv.base_url, rounds=[8, 4], token_budget=10_000)
    assert [len(r) for r in result.rounds] == [8, 4, 1]
    assert "round_control" not in result.extra


# ----------------------------------------------------------------- command line


def test_cli_flags_reach_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedServer(agreeing).run_in_thread() as srv:
        code = main(
            [
                "run", "Q", "--json", "--base-url", srv.base_url, "--model", "scripted",
                "--rounds", "4,2", "--early-stop-consensus", "0.75", "--token-budget", "5000",
                "--round-quorum", "1.0", "--no-progress",
            ]
        )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extra"]["early_stop"]["skipped_widths"] == [2, 1]
    assert len(out["rounds"]) == 1


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [
        ("--round-quorum", "0", "--round-quorum"),
        ("--early-stop-consensus", "1.5", "--early-stop-consensus"),
        ("--token-budget", "0", "--token-budget"),
    ],
)
def test_cli_rejects_bad_round_control_values(
    flag: str, value: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "Q", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", flag, value]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own type errors
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
