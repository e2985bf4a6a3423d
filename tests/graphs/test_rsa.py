# ruff: noqa: E501, UP006, UP035
"""RSA as a graph (graphs/rsa.py), over real HTTP against the scripted server.

The prompts sent are checked against a verbatim copy of the public code's
``aggregate_prompt`` (HyperPotatoNeo/RSA @ 537ec6065f21a5d128a164d14c0de6f4ed79de1f,
``eval_loop.py``), so a drift from RSA's wording fails here.
"""

from __future__ import annotations

import re
from typing import Any, List

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graphs.rsa import build_rsa_graph, draw_subsets, problem_key, rsa_prompt
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.testing.scripted_server import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.seeds import explorer_seed

QUESTION = "What is 6 times 7?"
BASE_SEED = 500


# --- verbatim from HyperPotatoNeo/RSA eval_loop.py (537ec60), do not edit -----------------
# fmt: off
def aggregate_prompt(question: str, candidate_answers: List[str], task: str) -> str:
    if task == 'rg':
        problem_kind = 'problem'
        format_hint = '<answer>...</answer>'
    elif task == 'supergpqa':
        problem_kind = 'multiple-choice problem'
        format_hint = '\\boxed{}. Only include the correct option letter in \\boxed{}; for example \\boxed{A}'
    else:
        problem_kind = 'math problem'
        format_hint = '\\boxed{}'

    parts = []
    if len(candidate_answers) == 1:
        parts.append(
            f"You are given a {problem_kind} and a candidate solution. "
            "The candidate may be incomplete or contain errors. "
            "Refine this trajectory and produce an improved, higher-quality solution. "
            "If it is entirely wrong, attempt a new strategy. "
            f"End with the final result in {format_hint}.\n"
        )
    else:
        parts.append(
            f"You are given a {problem_kind} and several candidate solutions. "
            "Some candidates may be incorrect or contain errors. "
            "Aggregate the useful ideas and produce a single, high-quality solution. "
            "Reason carefully; if candidates disagree, choose the correct path. If all are incorrect, then attempt a different strategy."
            f"End with the final result in {format_hint}.\n"
        )

    parts.append("Problem:\n")
    parts.append(question.strip() + "\n")

    if len(candidate_answers) == 1:
        parts.append("Candidate solution (may contain mistakes):\n")
        ans_str = (candidate_answers[0] or "").strip()
        parts.append(f"---- Candidate ----\n{ans_str}\n")
        parts.append(
            f"Now refine the candidate into an improved solution. Provide clear reasoning and end with the final answer in {format_hint}."
        )
    else:
        parts.append("Candidate solutions (may contain mistakes):\n")
        for i, ans in enumerate(candidate_answers, 1):
            ans_str = (ans or "").strip()
            parts.append(f"---- Solution {i} ----\n{ans_str}\n")
        parts.append(
            f"Now write a single improved solution. Provide clear reasoning and end with the final answer in {format_hint}."
        )

    return "\n".join(parts)


# fmt: on
# --- end of the verbatim copy -------------------------------------------------------------

AGGREGATE_START = "You are given a math problem and several candidate solutions."
REFINE_START = "You are given a math problem and a candidate solution."


@pytest.mark.parametrize("task", ["math", "rg", "supergpqa"])
@pytest.mark.parametrize(
    "candidates",
    [["  one \\boxed{1}\n", "two"], ["only one  "], ["a", "", "c\nd"]],
)
def test_the_prompt_is_the_public_codes_byte_for_byte(task: Any, candidates: list[str]) -> None:
    question = "  Find x.\n"
    assert rsa_prompt(question, candidates, task) == aggregate_prompt(question, candidates, task)


def test_subsets_are_k_distinct_candidates_drawn_reproducibly_per_seed_problem_and_step() -> None:
    population = [0, 1, 2, 3, 5]  # candidate 4 failed: never drawn
    subsets = draw_subsets(population, 6, 3, 7, 1, "id:p1")
    assert len(subsets) == 6
    assert all(len(s) == 3 and len(set(s)) == 3 and set(s) <= set(population) for s in subsets)
    assert draw_subsets(population, 6, 3, 7, 1, "id:p1") == subsets  # same problem, same draw
    assert draw_subsets(population, 6, 3, 7, 1, "id:p2") != subsets  # another problem
    assert draw_subsets(population, 6, 3, 8, 1, "id:p1") != subsets  # another seed
    assert draw_subsets(population, 6, 3, 7, 2, "id:p1") != subsets  # another step
    assert all(len(s) == 2 for s in draw_subsets([0, 1], 3, 4, 7, 1))  # at most the survivors


def test_a_problem_is_keyed_by_its_id_else_by_its_conversation() -> None:
    convo = [{"role": "user", "content": QUESTION}]
    other = [{"role": "user", "content": "What is 5 times 8?"}]
    assert problem_key("p1", convo) == problem_key("p1", other) == "id:p1"
    assert problem_key(None, convo) == problem_key(None, [dict(m) for m in convo])
    assert problem_key(None, convo) != problem_key(None, other)
    assert problem_key(None, convo).startswith("sha256:")


def answer_by_input(request: ScriptedRequest) -> ScriptedReply:
    """First population: seed decides (2 of 4 say 42); aggregation: the majority of what it read."""
    text = request.last_user
    if text.startswith((AGGREGATE_START, REFINE_START)):
        read = re.findall(r"\\boxed\{(\d+)\}", text)
        best = max(sorted(set(read)), key=read.count)
        return ScriptedReply(
            content=f"Merged: \\boxed{{{best}}}", reasoning="reading the candidates"
        )
    seed = request.seed or 0
    answer = 42 if seed % 2 == 0 else 40 + seed % 7
    return ScriptedReply(content=f"So \\boxed{{{answer}}}", reasoning="working it out step by step")


def make_config() -> PaCoReConfig:
    return PaCoReConfig(sampling=SamplingParams(seed=BASE_SEED, max_tokens=200))


async def test_rsa_sends_the_public_prompt_over_http_and_records_each_candidates_reads(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_rsa_graph(
            client, 4, 2, 3, config=make_config(), tracing=TraceOptions(tracer_provider=provider)
        )
        result = await ainvoke_pacore(graph, QUESTION)
        await client.aclose()
        bodies = [r.body for r in srv.requests]

    # T populations of N, and the vote over the last one: same record shape as majority.
    assert result.schedule == (4, 4, 4)
    assert [len(r) for r in result.rounds] == [4, 4, 4]
    assert result.extra["aggregator"] == "majority" and result.extra["winner"] == "42"
    assert result.answer == "Merged: \\boxed{42}"
    # First population: one n=4 request on the question itself; later: one request each.
    assert bodies[0].get("n") == 4 and bodies[0]["messages"][-1]["content"] == QUESTION
    assert len(bodies) == 1 + 4 + 4
    by_seed = {b["seed"]: b for b in bodies[1:]}
    for r in (1, 2):
        previous = {t.index: t for t in result.rounds[r - 1]}
        for t in result.rounds[r]:
            assert len(t.references) == 2 and len(set(t.references)) == 2
            sent = by_seed[explorer_seed(BASE_SEED, r, t.index)]["messages"][-1]["content"]
            expected = aggregate_prompt(
                QUESTION, [previous[j].content for j in t.references], "math"
            )
            assert sent == expected  # the wire carries RSA's prompt, byte for byte
    # Effective TTC counts every candidate of every population, as PaCoRe's.
    assert result.effective_ttc == sum(t.completion_tokens for t in result.trajectories) > 0
    # Spans: each candidate's chat span links to exactly the K candidates it read.
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 12
    index_of = {s.context.span_id: s.attributes["pacore.explorer.index"] for s in chats}
    rounds = {
        s.context.span_id: s.attributes["pacore.round.index"]
        for s in exporter.get_finished_spans()
        if s.name.startswith("pacore.round")
    }
    for span in chats:
        r = rounds[span.parent.span_id]
        refs = [index_of[link.context.span_id] for link in span.links]
        if r == 0:
            assert refs == []
        else:
            t = result.rounds[r][span.attributes["pacore.explorer.index"]]
            assert tuple(refs) == t.references


async def test_rsa_draws_the_same_subsets_for_the_same_seed_and_others_for_another() -> None:
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")

        async def reads(seed: int) -> list[tuple[int, ...]]:
            graph = build_rsa_graph(client, 6, 3, 2, config=make_config(), seed=seed)
            result = await ainvoke_pacore(graph, QUESTION)
            return [t.references for t in result.rounds[1]]

        first, again, other = await reads(1), await reads(1), await reads(2)
        await client.aclose()
    assert first == again
    assert first != other


async def test_two_problems_of_one_run_draw_their_own_subsets_and_each_again_on_a_rerun() -> None:
    saver = InMemorySaver()
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_rsa_graph(client, 6, 3, 3, config=make_config(), checkpointer=saver)

        async def reads(problem_id: str | None, question: str, thread: str) -> list[Any]:
            config: Any = {"configurable": {"thread_id": thread}}
            result = await ainvoke_pacore(graph, question, problem_id=problem_id, config=config)
            return [t.references for r in result.rounds[1:] for t in r]

        first = await reads("p1", QUESTION, "a")
        other = await reads("p2", QUESTION, "b")  # same seed and question, another problem
        again = await reads("p1", QUESTION, "c")
        by_text = await reads(None, QUESTION, "d")
        other_text = await reads(None, "What is 5 times 8?", "e")
        await client.aclose()
    assert first == again  # the same problem draws the same subsets (a resume too)
    assert first != other
    assert by_text != other_text  # without ids, the question tells problems apart


async def test_rsa_final_comes_from_the_config_unless_given() -> None:
    config = make_config().model_copy(update={"rsa_final": "aggregate"})
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        from_config = await ainvoke_pacore(build_rsa_graph(client, 3, 2, 2, config=config), "Q")
        given = await ainvoke_pacore(
            build_rsa_graph(client, 3, 2, 2, config=config, final="majority"), "Q"
        )
        await client.aclose()
    assert from_config.schedule == (3, 3, 1) and "aggregator" not in from_config.extra
    assert given.schedule == (3, 3) and given.extra["aggregator"] == "majority"


async def test_rsa_final_aggregate_runs_one_more_aggregation_and_answers_with_it() -> None:
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_rsa_graph(client, 4, 3, 2, config=make_config(), final="aggregate")
        result = await ainvoke_pacore(graph, QUESTION)
        await client.aclose()
        last = srv.requests[-1].body
    assert result.schedule == (4, 4, 1)
    (final,) = result.rounds[-1]
    assert len(final.references) == 3
    assert last["messages"][-1]["content"].startswith(AGGREGATE_START)
    assert result.answer == final.message == "Merged: \\boxed{42}"
    assert "aggregator" not in result.extra


async def test_rsa_with_k_one_refines_one_candidate_with_the_public_refine_prompt() -> None:
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        result = await ainvoke_pacore(build_rsa_graph(client, 2, 1, 2, config=make_config()), "Q")
        await client.aclose()
        sent = [r.body["messages"][-1]["content"] for r in srv.requests[1:]]
    assert all(s.startswith(REFINE_START) for s in sent)
    for t, text in zip(sorted(result.rounds[1], key=lambda t: t.index), sent, strict=False):
        assert len(t.references) == 1
        assert "---- Candidate ----" in text


async def test_rsa_checkpoints_its_state_and_its_subsets() -> None:
    saver = InMemorySaver()
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_rsa_graph(client, 3, 2, 2, config=make_config(), checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "rsa-1"}}
        result = await ainvoke_pacore(graph, QUESTION, config=config)
        await client.aclose()
    state = await graph.aget_state(config)
    assert state.values["result"] == result
    # The last step's subsets are its plan's: each candidate's prompt and references.
    prompts = state.values["plan"].prompts
    assert [p.references for p in prompts] == [t.references for t in result.rounds[1]]


@pytest.mark.parametrize(
    ("n", "k", "t", "message"),
    [(4, 5, 2, "cannot be drawn"), (0, 1, 1, "N=0"), (4, 2, 0, "T=0"), (4, 0, 2, "K=0")],
)
def test_rsa_refuses_shapes_that_cannot_run(n: int, k: int, t: int, message: str) -> None:
    client = OpenAICompatClient("http://127.0.0.1:9/v1", "m", api_key="k")
    with pytest.raises(ValueError, match=message):
        build_rsa_graph(client, n, k, t)


async def test_rsa_streams_the_same_progress_events_as_pacore() -> None:
    async with ScriptedServer(answer_by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_rsa_graph(client, 3, 2, 2, config=make_config())
        events = [
            e
            async for e in graph.astream(
                {"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="custom"
            )
        ]
        await client.aclose()
    kinds = [(e["event"], e["round"]) for e in events if e["event"] != "explorer_finished"]
    assert kinds == [
        ("round_started", 0),
        ("round_compacted", 0),
        ("round_started", 1),
        ("round_compacted", 1),
    ]
    finished = sorted((e["round"], e["index"]) for e in events if e["event"] == "explorer_finished")
    assert finished == [(r, i) for r in (0, 1) for i in range(3)]
