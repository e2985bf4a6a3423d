"""RSA, DeepConf and the majority vote served by model name, over real HTTP.

The ``openai`` SDK talks to ``pacore serve``; the upstream is a scripted
server whose replies depend only on the request: a first round's answers by
sample index, a later round's by its seed (explorer ``i`` of round ``r``
sends ``explorer_seed(seed, r, i)``), every token at one confidence when
log-probabilities are asked. So the population each method votes over, and
the answer it must pick, are known before the run:

- first round (one ``n`` request): 7, 7, 7, 9, ... (sample index 3 says 9);
- a later round: its first explorer says 5, the others 42.

``rsa:4,2,2`` therefore votes 5, 42, 42, 42 (42: its last population's
majority, not its first's 7), ``deepconf-online:4`` votes over a warm-up of
7, 7 and a second round of 5, 42 (7).
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serve_support import RunningServe, running_serve, serve_process, serve_settings

from pacore_graph.eval.methods import build_method_graph
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graphs.deepconf import default_warmup
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.settings.grammar import SERVED_MODELS, parse_method
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.testing.scripted_server import count_tokens
from pacore_graph.values.compaction import AnswerCompactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.seeds import explorer_seed

FAST = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.01)
QUESTION = "What is 6 x 7?"
SEED = 11
MESSAGES = [{"role": "user", "content": QUESTION}]


def reply(answer: str) -> ScriptedReply:
    return ScriptedReply(
        content=f"So the answer is \\boxed{{{answer}}}.",
        reasoning=f"thinking about {answer}",
        confidence=2.0,
    )


#: Completion tokens of every sample (each reply has one-word answers).
TOKENS = count_tokens(reply("0").content) + count_tokens(reply("0").reasoning)


def answer_for(request: ScriptedRequest) -> str:
    if request.seed == explorer_seed(SEED, 1, 0):
        return "5"  # a later round's first explorer
    if request.seed is not None and request.seed != explorer_seed(SEED, 0, 0):
        return "42"  # a later round's other explorers
    return "9" if request.sample_index == 3 else "7"  # the first round, by sample index


def respond(request: ScriptedRequest) -> ScriptedReply:
    return reply(answer_for(request))


class CountingUpstream(ScriptedServer):
    """The scripted upstream, counting ``GET /v1/models`` too (the passthrough's question)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(respond, **kwargs)
        self.models_asked = 0

    async def _models(self, request: Any) -> Any:
        self.models_asked += 1
        return await super()._models(request)


@pytest.fixture
def upstream() -> Iterator[CountingUpstream]:
    with CountingUpstream().run_in_thread() as srv:
        yield srv


@pytest.fixture
def served(upstream: CountingUpstream) -> Iterator[RunningServe]:
    with running_serve(serve_settings(upstream, retry=FAST)) as srv:
        yield srv


def sdk(srv: RunningServe) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)


def ask(srv: RunningServe, model: str, **fields: Any) -> Any:
    return sdk(srv).chat.completions.create(model=model, messages=MESSAGES, seed=SEED, **fields)


def metric(srv: RunningServe, name: str, **labels: str) -> float:
    text = srv.state.metrics.exposition().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"{name}{labels} not exposed")


async def library_run(upstream: ScriptedServer, spec: str, sampling: SamplingParams) -> Any:
    """The same method through ``build_method_graph`` in-process (``pacore run --method``)."""
    client = OpenAICompatClient(upstream.base_url, "scripted", retry=FAST)
    try:
        graph = build_method_graph(
            parse_method(spec), client, config=PaCoReConfig(sampling=sampling)
        )
        return await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()


# --------------------------------------------------------------------------- RSA


def test_rsa_answers_its_last_populations_majority(
    served: RunningServe, upstream: CountingUpstream
) -> None:
    n, k, t = 4, 2, 2
    got = ask(served, f"rsa:{n},{k},{t}", temperature=0.3, max_tokens=64)
    assert got.model == "rsa:4,2,2"
    assert got.choices[0].message.content == "So the answer is \\boxed{42}."
    assert (got.choices[0].message.model_extra or {})["reasoning_content"] == "thinking about 42"
    assert got.choices[0].finish_reason == "stop"

    # The upstream saw N x T samples: the first population as one n=N request,
    # then one request per later candidate, each reading K of the previous N.
    bodies = [r.body for r in upstream.requests]
    assert len(bodies) == 1 + n * (t - 1)
    assert sum(b.get("n", 1) for b in bodies) == n * t
    first, later = bodies[0], bodies[1:]
    assert first["n"] == n and first["messages"][-1]["content"] == QUESTION
    for body in later:
        prompt = body["messages"][-1]["content"]
        assert [f"---- Solution {i} ----" in prompt for i in (1, 2, 3)] == [True] * k + [False]
        assert prompt.count("\\boxed{7}") + prompt.count("\\boxed{9}") == k
    assert sorted(b["seed"] for b in later) == [explorer_seed(SEED, 1, i) for i in range(n)]
    for body in bodies:  # the request's sampling reached every call
        assert (body["temperature"], body["max_tokens"], body["model"]) == (0.3, 64, "scripted")

    # Usage: effective test-time compute, every sample of every population.
    usage = got.usage
    assert usage is not None
    assert usage.completion_tokens == n * t * TOKENS
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    rounds = (usage.model_extra or {})["rounds"]
    assert [r["width"] for r in rounds] == [n] * t
    assert [r["completion_tokens"] for r in rounds] == [n * TOKENS] * t

    # The same queue and metrics as a PaCoRe run.
    assert served.state.runs_started == 1 and served.state.active == 0
    assert metric(served, "pacore_runs_total", outcome="ok") == 1
    assert metric(served, "pacore_replica_samples_total", upstream="0") == n * t

    # ... and the same run as `pacore run --method rsa:4,2,2` in-process.
    sampling = SamplingParams(seed=SEED, temperature=0.3, max_tokens=64)
    expected = asyncio.run(library_run(upstream, "rsa:4,2,2", sampling))
    assert got.choices[0].message.content == expected.answer
    assert usage.completion_tokens == expected.effective_ttc


def test_one_graph_per_method_is_compiled_and_reused(served: RunningServe) -> None:
    for _ in range(2):
        ask(served, "majority:2")
    ask(served, "pacore:2")  # PaCoRe keeps its one graph
    assert served.state.methods.built == 1 and "majority:2" in served.state.methods


# --------------------------------------------------------------------------- DeepConf


def test_deepconf_online_answers_by_confidence_weighted_vote(
    served: RunningServe, upstream: CountingUpstream
) -> None:
    n = 4
    warmup = default_warmup(n)
    got = ask(served, f"deepconf-online:{n}")
    assert got.choices[0].message.content == "So the answer is \\boxed{7}."

    # A warm-up of W traces in one request, then each other trace streamed on
    # its own (the unit the server can stop), all asking for log-probabilities.
    bodies = [r.body for r in upstream.requests]
    assert [(b.get("n", 1), bool(b.get("stream"))) for b in bodies] == [(warmup, False)] + [
        (1, True)
    ] * (n - warmup)
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in bodies)

    usage = got.usage
    assert usage is not None and usage.completion_tokens == n * TOKENS
    rounds = (usage.model_extra or {})["rounds"]
    assert [r["width"] for r in rounds] == [warmup, n - warmup]


def test_bare_names_run_their_defaults_and_win_over_an_upstream_model_of_that_name() -> None:
    """``deepconf`` is ``deepconf:16``; ``majority`` is served here even if an upstream has one."""
    with CountingUpstream(model="majority").run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(serve_settings(upstream, model="majority", retry=FAST)) as srv:
            ids = [m.id for m in sdk(srv).models.list()]
            for name in ("deepconf", "majority"):
                upstream.reset_log()
                got = ask(srv, name)
                assert got.model == name
                (body,) = [r.body for r in upstream.requests]
                assert body["n"] == 16  # one n=16 request: the default's 16 traces
                assert bool(body.get("logprobs")) is (name == "deepconf")
                assert got.usage is not None and got.usage.completion_tokens == 16 * TOKENS
            assert srv.state.methods.built == 2
    # Listed once, as ours: the upstream's model of that name is shadowed.
    assert ids == list(SERVED_MODELS)


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize(
    ("model", "widths"),
    [("rsa:4,2,2", (4, 4)), ("deepconf-online:4", (2, 2)), ("majority:3", (3,))],
)
def test_streaming_a_method_with_the_sdk(
    served: RunningServe, upstream: CountingUpstream, model: str, widths: tuple[int, ...]
) -> None:
    plain = ask(served, model)
    chunks = list(ask(served, model, stream=True, stream_options={"include_usage": True}))
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == plain.choices[0].message.content
    total = len(widths)
    for r, width in enumerate(widths):
        assert f"Round {r + 1}/{total}: {width} parallel explorers." in reasoning
    assert f"Round {total} done: {widths[-1]} answers to vote on, 0 failed" in reasoning
    assert "synthesising" not in reasoning
    assert reasoning.count("explorer ") == sum(widths)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None and plain.usage is not None
    assert usage.completion_tokens == plain.usage.completion_tokens == sum(widths) * TOKENS
    assert len({c.id for c in chunks}) == 1 and {c.model for c in chunks} == {model}


# --------------------------------------------------------------------------- aggagent


def test_aggagent_is_served_by_name_streamed_or_not(
    served: RunningServe, upstream: CountingUpstream
) -> None:
    """N explorers, then the agent (here it answers at once: this upstream calls no tool)."""
    plain = ask(served, "aggagent:3", temperature=0.4)
    assert plain.model == "aggagent:3"
    # The agent's call is the run's final step, seeded as PaCoRe's final round would be.
    assert plain.choices[0].message.content == "So the answer is \\boxed{5}."
    bodies = [r.body for r in upstream.requests]
    assert [(b.get("n"), bool(b.get("tools"))) for b in bodies] == [(3, False), (None, True)]
    assert {b["temperature"] for b in bodies} == {0.4}
    usage = plain.usage
    assert usage is not None and usage.completion_tokens == 4 * TOKENS
    assert [r["width"] for r in (usage.model_extra or {})["rounds"]] == [3, 1]
    chunks = list(ask(served, "aggagent:3", stream=True, stream_options={"include_usage": True}))
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == plain.choices[0].message.content
    assert "Round 1/2: 3 parallel explorers." in reasoning
    assert "Round 2/2: synthesising the answer." in reasoning
    assert reasoning.count("explorer ") == 3
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4 * TOKENS
    assert "aggagent" in [m.id for m in sdk(served).models.list()]


# --------------------------------------------------------------------------- refusals


def post(srv: RunningServe, model: str, **fields: Any) -> httpx.Response:
    body = {"model": model, "messages": MESSAGES, **fields}
    return httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=60)


def error(resp: httpx.Response, status: int, param: str) -> str:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["param"] == param
    return str(err["message"])


@pytest.mark.parametrize(
    ("model", "fields", "status", "param", "says"),
    [
        ("rsa:1024,4,10", {}, 400, "model", "rsa runs 10240 model calls; at most 4096"),
        ("rsa:2,1,17", {}, 400, "model", "rsa runs 17 rounds; at most 16"),
        ("rsa:4,2,2", {"rounds": [2]}, 400, "rounds", "PaCoRe models only"),
        ("deepconf", {"rounds": "4"}, 400, "rounds", "deepconf:16"),
        ("rsa:4,8,2", {}, 404, "model", "K=8 cannot be drawn from a population of N=4"),
        ("rsa:0,1,1", {}, 404, "model", "[1, 1024]"),
        ("rsa:4,2", {}, 404, "model", "rsa:N,K,T"),
        ("deepconf-online:1", {}, 404, "model", "at least 2"),
        ("majority:x", {}, 404, "model", "positive integer"),
        ("single", {}, 404, "model", "unknown model"),
    ],
)
def test_over_budget_and_bad_names_are_refused_before_any_upstream_call(
    served: RunningServe,
    upstream: CountingUpstream,
    model: str,
    fields: dict[str, Any],
    status: int,
    param: str,
    says: str,
) -> None:
    assert says in error(post(served, model, **fields), status, param)
    assert upstream.request_count == 0
    if model != "single":  # a name of the methods' grammar: not even the model list is asked
        assert upstream.models_asked == 0
    assert served.state.runs_started == 0 and served.state.methods.built == 0


def test_the_operators_caps_bound_every_method(upstream: CountingUpstream) -> None:
    limits = RequestLimits(max_rounds=2, max_samples_per_request=8)
    with running_serve(serve_settings(upstream, retry=FAST, limits=limits)) as srv:
        assert "rsa runs 10 rounds; at most 2" in error(post(srv, "rsa"), 400, "model")
        assert "rsa runs 16 model calls; at most 8" in error(post(srv, "rsa:8,1,2"), 400, "model")
        assert "16 model calls" in error(post(srv, "deepconf-online"), 400, "model")
        assert "majority runs 9" in error(post(srv, "majority:9"), 400, "model")
        assert upstream.request_count == 0
        assert post(srv, "rsa:4,2,2").status_code == 200  # 8 calls: at the cap
    assert sum(r.body.get("n", 1) for r in upstream.requests) == 8


def test_a_methods_settings_never_fail_after_admission(upstream: CountingUpstream) -> None:
    """A registered compactor or a raised max_tokens cap: a method run honours them as PaCoRe does.

    The method graphs are built with the server's compactors and caps, so a
    context that PaCoRe accepts is accepted by every method (never a 500
    after admission from a graph checking against the built-ins).
    """
    registry = CompactorRegistry({"short": AnswerCompactor()})
    limits = RequestLimits(max_tokens_cap=200_000)
    fields = serve_settings(upstream, retry=FAST, compactors=registry, limits=limits)
    with running_serve(fields) as srv:
        ok = post(srv, "pacore:2", compactor="short", max_tokens=150_000)
        assert ok.status_code == 200, ok.text
        for asked, param in (
            ({"compactor": "short"}, "compactor"),
            ({"max_tokens": 150_000}, "max_tokens"),
        ):
            upstream.reset_log()
            resp = post(srv, "majority:2", **asked)
            assert resp.status_code == 200, (param, resp.text)
            assert upstream.request_count == 1
        assert post(srv, "majority:2", compactor="answer").status_code == 200  # a built-in


# --------------------------------------------------------------------------- a wide vote


def slow_distinct_answer(request: ScriptedRequest) -> ScriptedReply:
    r"""A different answer per sample, each a symbolic sum math-verify takes ~10 ms to parse.

    ``\frac{A\pi}{B} + \sqrt{C}`` with A, B, C from a hash of the sample's
    seed and index: 1024 samples make 1024 distinct values (no pair for the
    vote to compare) and a vote of 10 s or more however fast the machine,
    so the checks below fall inside it (the test stops it with SIGTERM).
    """
    digest = hashlib.sha256(f"{request.seed}|{request.sample_index}".encode()).digest()
    a, b, c = 2 + digest[0] * 4 + digest[1] % 4, 2 + digest[2] * 4 + digest[3] % 4, 2 + digest[4]
    return ScriptedReply(content=f"So \\boxed{{\\frac{{{a}\\pi}}{{{b}}} + \\sqrt{{{c}}}}}.")


def test_a_wide_vote_leaves_the_server_responsive_and_sigterm_ends_it() -> None:
    """``majority:1024`` over 1024 distinct answers: /health and /stats answer, SIGTERM ends it.

    Issue 31 (round 4): with the vote on the event loop, a ``majority:1024``
    request over distinct answers left /health and /stats unanswered for
    minutes and SIGTERM could not stop the server. Here ``pacore serve`` runs
    in a process of its own; once the scripted upstream has answered all 1024
    samples, /health and /stats are asked for 3 s (the run's compaction and
    its vote of 10 s or more) and must each answer within 2 s (well under a
    second when quiet; a loaded machine's pauses stop every thread). The
    request must still be running then (the vote was not skipped), and
    SIGTERM ends the server within its ``--drain-timeout`` (1 s) plus 5 s:
    the drain cancels the run, and the vote's thread stops at its next answer.
    """
    served: list[int] = []

    def answer(request: ScriptedRequest) -> ScriptedReply:
        served.append(1)
        return slow_distinct_answer(request)

    with (
        ScriptedServer(answer).run_in_thread() as upstream,
        serve_process(
            "--upstream",
            upstream.base_url,
            "--model",
            "scripted",
            "--drain-timeout",
            "1",
            "--log-level",
            "warning",
        ) as server,
    ):
        body = {"model": "majority:1024", "messages": MESSAGES, "seed": SEED}
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["status"] = httpx.post(
                    f"{server.base}/v1/chat/completions", json=body, timeout=120
                ).status_code
            except httpx.TransportError as exc:
                outcome["error"] = exc

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        deadline = time.monotonic() + 60
        while len(served) < 1024:  # every sample answered: compaction, then the vote
            assert time.monotonic() < deadline and caller.is_alive(), outcome
            time.sleep(0.05)
        slowest: dict[str, float] = {"/health": 0.0, "/stats": 0.0}
        window = time.monotonic() + 3.0
        while time.monotonic() < window:
            for path in slowest:
                asked = time.monotonic()
                try:
                    resp = httpx.get(f"{server.base}{path}", timeout=2.0)
                except httpx.TimeoutException:
                    pytest.fail(f"{path} went unanswered for 2 s during the vote")
                assert resp.status_code == 200, (path, resp.text)
                slowest[path] = max(slowest[path], time.monotonic() - asked)
            time.sleep(0.1)
        stats = httpx.get(f"{server.base}/stats", timeout=2.0).json()
        assert caller.is_alive(), f"the vote ended before the checks did: {outcome}"
        assert stats["runs_in_progress"] == 1, stats
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=30)
        stopped = time.monotonic() - signalled
    assert max(slowest.values()) < 2.0, slowest
    assert code in (0, -signal.SIGTERM)
    assert stopped < 1 + 5, f"SIGTERM took {stopped:.1f} s to end the server"
