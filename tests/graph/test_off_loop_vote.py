"""A graph's vote off the event loop: the verdict the vote gives, the loop free, a cancel stops it.

PaCoRe's finalize runs its aggregator through
:func:`~pacore_graph.values.aggregation.aggregate_off_loop`. Over real HTTP: a
scripted server answers each sample with a different word (by the question
and the sample index), so the vote parses every answer with math-verify (and
burns a few ms per answer, so it is long on any machine). The majority graph
runs it in a worker thread while a ticker task measures how long the loop goes
unanswered; the verdict equals the vote called directly on the run's rounds.
"""

from __future__ import annotations

import asyncio
import hashlib
import string
import time

import pytest
from vote_support import Recorded, loop_lag, slow_extract

from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.aggregation import (
    MajorityVote,
    extract_final_answer,
)

K = 120


def config(k: int) -> PaCoReConfig:
    """K samples, seeded: each ``n`` chunk carries its first explorer's seed, so answers differ."""
    return PaCoReConfig(sampling=SamplingParams(seed=5)).with_settings({"rounds": [k]})


def word_for(request: ScriptedRequest) -> ScriptedReply:
    """A different ten-letter word per question and sample (request seed and index)."""
    key = f"{request.last_user}|{request.seed}|{request.sample_index}"
    digest = hashlib.sha256(key.encode()).digest()
    word = "".join(string.ascii_lowercase[b % 26] for b in digest[:10])
    return ScriptedReply(content=f"So the answer is \\boxed{{\\text{{{word}}}}}.")


def question() -> str:
    """A question no earlier run of this process asked (its answers are not cached yet)."""
    return f"Which word comes first? ({time.time_ns()})"


async def test_the_vote_runs_off_the_loop_and_records_what_the_loop_would() -> None:
    async with ScriptedServer(word_for) as server:
        client = OpenAICompatClient(server.base_url, "scripted")
        try:
            problem = question()
            done = asyncio.Event()
            lag = asyncio.ensure_future(loop_lag(done))
            started = time.monotonic()
            graph = build_majority_graph(client, K, config=config(K), extract=slow_extract)
            result = await ainvoke_pacore(graph, problem)
            took = time.monotonic() - started
            done.set()
            worst = await lag
        finally:
            await client.aclose()
    direct = MajorityVote(extract=extract_final_answer).aggregate(result.rounds)
    assert len(result.extra["votes"]) == K
    assert result.extra["aggregator"] == "majority"
    assert result.extra["chosen"] == direct.trajectory.id
    for key in ("votes", "winner", "tie"):
        assert result.extra[key] == direct.details[key]
    assert result.answer == direct.answer
    assert took > 0.3, "the run was too quick to tell"
    assert worst < max(0.25, took / 3), f"the loop stalled {worst:.2f} s of a {took:.2f} s run"


async def test_cancelling_the_run_stops_its_vote() -> None:
    vote = Recorded(MajorityVote(), name="majority")
    async with ScriptedServer(word_for) as server:
        client = OpenAICompatClient(server.base_url, "scripted")
        try:
            graph = build_pacore_graph(client, config=config(600), aggregator=vote, name="majority")
            run = asyncio.ensure_future(ainvoke_pacore(graph, question()))
            while not vote.started.is_set():
                assert not run.done(), run
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            cancelled = time.monotonic()
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            while not vote.ended and time.monotonic() - cancelled < 10:
                await asyncio.sleep(0.01)
        finally:
            await client.aclose()
    assert vote.ended, "the vote ran on after its run was cancelled"
    ended, outcome = vote.ended[0]
    assert outcome == "VoteCancelledError"
    assert ended - cancelled < 2.0
