"""RSA, Recursive Self-Aggregation (arXiv 2509.26626), built from PaCoRe's parts.

A population of N candidates; at each later step every new candidate is
written from a random subset of K candidates of the previous population
(PaCoRe shows every message to every trajectory). After T populations the
answer is a majority vote over the last population's extracted answers
(ties as in ``majority:K``: the lowest explorer index), or, with
``final="aggregate"`` (the config's ``rsa_final``, ``--rsa-final``), one
more aggregation of K random candidates whose single answer is streamed.

Where the paper leaves details open this follows its public code,
HyperPotatoNeo/RSA at commit ``537ec6065f21a5d128a164d14c0de6f4ed79de1f``,
file ``eval_loop.py``:

- :func:`rsa_prompt` is ``aggregate_prompt`` byte for byte (its three task
  kinds, its single-candidate "refine" wording, and its missing space in
  "strategy.End with"); ``tests/graphs/test_rsa.py`` holds a verbatim copy
  of the public function and checks the prompts sent over HTTP against it;
- ``T`` is its ``--loops``: the number of populations, the first written
  from the question alone (``rsa:16,4,10`` is its default: 16 candidates,
  4 read by each, 10 populations);
- a subset is ``random.sample(population, K)``: K distinct candidates, in the
  order drawn, one draw per new candidate in candidate order; the public
  code seeds one global RNG per process, so each problem gets its own draws;
  here a ``random.Random`` per (seed, problem, step), the problem named by
  its id or else a digest of its conversation (:func:`problem_key`), so
  problems of one run draw differently while a run is reproducible and
  resumes the same;
- the aggregation prompt replaces the user's message (the public code sends
  it as the only user turn); earlier messages (a system prompt) are kept;
- a candidate's text is its compacted message (``conclusion`` by default:
  the answer after the reasoning, which is the whole text for the
  non-reasoning instruct models the paper reports); the public code passes
  the model's whole output, which a server with a reasoning parser splits;
- a failed candidate (recorded, as in PaCoRe) cannot be read: subsets are
  drawn from the successful ones (at most K of them).

RSA is PaCoRe's builder with one part changed, the round plan
(:class:`RSAPlan`): each candidate's prompt differs, so later steps send one
request per candidate (the first population is one ``n=N`` request); each
explorer span links to the K candidates it read, and each trajectory's
``references`` are their indices, so the message graph and the traces show
the subsets. The answer is the majority vote (an aggregator), or with
``final="aggregate"`` the plan's one more aggregation as the answer round.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.graph.plans import ExplorerPrompt, RoundInput, RoundPrompts
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PaCoReConfig
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.aggregation import MajorityVote, extract_final_answer
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.prompts import last_user_index

__all__ = [
    "RSA_TASKS",
    "RSAFinal",
    "RSAPlan",
    "RSATask",
    "build_rsa_graph",
    "draw_subsets",
    "problem_key",
    "rsa_prompt",
]

#: The public code's task kinds (``get_task_name``): the wording of the prompt.
RSATask = Literal["math", "rg", "supergpqa"]
RSA_TASKS: tuple[RSATask, ...] = ("math", "rg", "supergpqa")
#: ``majority``: vote over the last population; ``aggregate``: one more aggregation.
RSAFinal = Literal["majority", "aggregate"]


def rsa_prompt(question: str, candidate_answers: Sequence[str], task: RSATask = "math") -> str:
    """RSA's aggregation prompt: ``aggregate_prompt`` of the public code, byte for byte."""
    if task == "rg":
        problem_kind = "problem"
        format_hint = "<answer>...</answer>"
    elif task == "supergpqa":
        problem_kind = "multiple-choice problem"
        format_hint = (
            "\\boxed{}. Only include the correct option letter in \\boxed{}; for example \\boxed{A}"
        )
    else:
        problem_kind = "math problem"
        format_hint = "\\boxed{}"

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
            "Reason carefully; if candidates disagree, choose the correct path. "
            "If all are incorrect, then attempt a different strategy."
            f"End with the final result in {format_hint}.\n"
        )

    parts.append("Problem:\n")
    parts.append(question.strip() + "\n")

    if len(candidate_answers) == 1:
        parts.append("Candidate solution (may contain mistakes):\n")
        ans_str = (candidate_answers[0] or "").strip()
        parts.append(f"---- Candidate ----\n{ans_str}\n")
        parts.append(
            "Now refine the candidate into an improved solution. Provide clear reasoning "
            f"and end with the final answer in {format_hint}."
        )
    else:
        parts.append("Candidate solutions (may contain mistakes):\n")
        for i, ans in enumerate(candidate_answers, 1):
            ans_str = (ans or "").strip()
            parts.append(f"---- Solution {i} ----\n{ans_str}\n")
        parts.append(
            "Now write a single improved solution. Provide clear reasoning and end with "
            f"the final answer in {format_hint}."
        )

    return "\n".join(parts)


def problem_key(problem_id: str | None, conversation: Sequence[Mapping[str, Any]]) -> str:
    """What makes a problem's subsets its own: its id, else a digest of its conversation.

    Both are in the run's checkpointed input, so a resumed run finds the
    same key; the digest covers runs without an id (``pacore run "Q"``).
    """
    if problem_id:
        return f"id:{problem_id}"
    text = json.dumps(
        [dict(m) for m in conversation], sort_keys=True, ensure_ascii=False, default=str
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def draw_subsets(
    population: Sequence[int],
    width: int,
    k: int,
    seed: int | str,
    step: int,
    problem: str = "",
) -> tuple[tuple[int, ...], ...]:
    """The subsets of step ``step``: ``width`` draws of ``min(k, len(population))`` indices.

    One ``random.Random`` per (seed, problem, step): the same problem of the
    same run draws the same subsets, on a resume too, and two problems of
    one run draw their own (``problem`` is :func:`problem_key`'s).
    """
    rng = random.Random(f"rsa\x1f{seed}\x1f{problem}\x1f{step}")
    size = min(k, len(population))
    pool = list(population)
    return tuple(tuple(rng.sample(pool, size)) for _ in range(width))


def _aggregation_messages(
    conversation: Sequence[Mapping[str, Any]], text: str
) -> tuple[dict[str, Any], ...]:
    out = [dict(m) for m in conversation]
    out[last_user_index(out)]["content"] = text
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RSAPlan:
    """RSA's rounds as a round plan: population 0 from the question alone; each later
    candidate from its own draw of ``k`` candidates of the previous population.

    ``seed`` and the problem (:func:`problem_key`) seed the draws
    (:func:`draw_subsets`); ``task`` picks the prompt's wording
    (:func:`rsa_prompt`). A failed candidate cannot be read: draws are from
    the successful ones.
    """

    k: int
    seed: int | str = 0
    task: RSATask = "math"

    def __call__(self, round: RoundInput, /) -> RoundPrompts:
        if round.round == 0:
            return RoundPrompts.shared(round.problem, reads=())
        readable = sorted((t for t in round.previous if not t.failed), key=lambda t: t.index)
        problem = problem_key(round.problem_id, round.problem)
        subsets = draw_subsets(
            [t.index for t in readable], round.width, self.k, self.seed, round.round, problem
        )
        by_index = {t.index: t for t in readable}
        question = _question(round.problem)
        prompts = tuple(
            ExplorerPrompt(
                messages=_aggregation_messages(
                    round.problem,
                    rsa_prompt(question, [by_index[j].message or "" for j in subset], self.task),
                ),
                references=tuple(subset),
            )
            for subset in subsets
        )
        read = sorted({i for subset in subsets for i in subset})
        return RoundPrompts(prompts=prompts, reads=tuple(by_index[i].message or "" for i in read))


def _question(conversation: Sequence[Mapping[str, Any]]) -> str:
    content = conversation[last_user_index(conversation)].get("content")
    return content if isinstance(content, str) else ""


def build_rsa_graph(
    client: ChatClient,
    n: int,
    k: int,
    t: int,
    *,
    config: PaCoReConfig | None = None,
    final: RSAFinal | None = None,
    task: RSATask = "math",
    seed: int | str | None = None,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
    extract: Callable[[str], str | None] = extract_final_answer,
) -> Any:
    """RSA with population ``n``, subsets of ``k`` and ``t`` populations (``rsa:N,K,T``).

    ``seed`` seeds the subsets (default: the config's ``shuffle_seed``, else
    0); ``final`` is how it answers (default: the config's ``rsa_final``,
    ``majority``); ``config`` gives sampling, retries and concurrency (its
    ``rounds`` are replaced by ``[n] * t``).
    """
    base = config or PaCoReConfig()
    final = base.rsa_final if final is None else final
    for label, value, low in (("N", n, 1), ("K", k, 1), ("T", t, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"rsa:N,K,T needs whole numbers >= 1; got {label}={value!r}")
    if n > MAX_ROUND_WIDTH:
        raise ValueError(f"rsa: population N={n} is above the widest round ({MAX_ROUND_WIDTH})")
    if k > n:
        raise ValueError(f"rsa: K={k} candidates cannot be drawn from a population of N={n}")
    if final not in ("majority", "aggregate"):
        raise ValueError(f"rsa final must be 'majority' or 'aggregate'; got {final!r}")
    if task not in RSA_TASKS:
        raise ValueError(f"rsa task must be one of {', '.join(RSA_TASKS)}; got {task!r}")
    cfg = base.with_settings({"rounds": [n] * t})  # validated widths
    run_seed = (
        seed if seed is not None else (cfg.shuffle_seed if cfg.shuffle_seed is not None else 0)
    )
    return build_pacore_graph(
        client,
        config=cfg,
        plan=RSAPlan(k=k, seed=run_seed, task=task),
        aggregator=MajorityVote(extract=extract) if final == "majority" else None,
        compactor=compactor,
        limiter=limiter,
        tracing=tracing,
        name="rsa",
        checkpointer=checkpointer,
        compactors=compactors,
        limits=limits,
    )
