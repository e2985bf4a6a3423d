"""Building the message graph of a run: which trajectories' messages fed which later trajectory.

PaCoRe's rounds talk only through compacted messages: trajectory ``r{r}.{i}``
sees the messages of round ``r-1`` that its prompt held, and nothing else.
When a run goes wrong (the final answer is a minority view, a correct early
answer is lost, a failed call silently thins a round) the question is how
answers travelled, so every :class:`~pacore_graph.values.records.PaCoReResult` can
be turned into a ``networkx.DiGraph``:

- **nodes** are trajectories, named by :attr:`~pacore_graph.values.records.Trajectory.id`
  (``r0.3``), with their round, index, tokens, finish reason, failure, the
  answer extracted from their content and, when a ground truth is known,
  whether that answer is correct;
- **edges** go from a message to every trajectory whose prompt held it, with
  the message's 1-based ``position`` in that prompt (the records'
  ``references``, in prompt order). Failed calls left no message, so their
  nodes have no outgoing edges; a record that says otherwise is rejected.

Grading uses :mod:`pacore_graph.eval.graders`, so this package sits *above*
evaluation: the records know nothing of it (the core imports nothing from
``eval/``), and a graph is built with :func:`message_graph`, not a method of
the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import networkx as nx

from pacore_graph.eval.graders import auto_grader, ground_truth_answer
from pacore_graph.values.aggregation import extract_final_answer
from pacore_graph.values.records import PaCoReResult, trajectory_id

if TYPE_CHECKING:
    from pacore_graph.eval.graders import Grader

__all__ = ["message_graph"]


def _grade(grader: Grader, content: str, ground_truth: Any) -> float:
    """Score of one trajectory; a grader that breaks its never-raise promise scores 0."""
    try:
        return float(grader.grade(content, ground_truth).score)
    except Exception:
        return 0.0


def message_graph(
    result: PaCoReResult, *, ground_truth: Any = None, grader: Grader | None = None
) -> nx.DiGraph:
    """The run's message-passing DAG: trajectories as nodes, consumed messages as edges.

    Node attributes: ``round``, ``index``, ``completion_tokens``,
    ``prompt_tokens``, ``latency_s``, ``finish_reason`` (``""`` when the
    server gave none), ``failed``, ``error`` (``""`` unless failed),
    ``truncated``, ``answer`` (:func:`~pacore_graph.values.aggregation.extract_final_answer`
    of the content, ``""`` when there is none or the call failed),
    ``message_chars`` and ``final`` (this trajectory gave the run's answer).
    With a ground truth (one :func:`~pacore_graph.eval.graders.ground_truth_answer`
    can read) every node also gets ``score`` and ``correct`` (full score), graded
    by ``grader`` (default: the math grader); failed calls are never correct.

    Edge ``u -> v`` with ``position`` p: ``u``'s message was the p-th
    reference in ``v``'s prompt. Graph attributes: ``problem_id``, ``answer``,
    ``final_answer`` (extracted), ``final`` (node id), ``effective_ttc``,
    ``schedule`` (a list), ``model``, ``preset`` and ``ground_truth``.

    Raises ``ValueError`` for a record whose references name a trajectory that
    does not exist or that failed (it had no message to pass), or name one
    twice: such a record was not produced by a run, and a graph of it would
    show message passing that never happened.
    """

    expected = ground_truth_answer(ground_truth)
    if expected is not None and grader is None:
        grader = auto_grader(None)
    try:
        final_id: str | None = result.final.id
    except (IndexError, StopIteration):  # a record with no rounds
        final_id = None
    g = nx.DiGraph(
        problem_id=result.problem_id,
        answer=result.answer,
        final_answer=extract_final_answer(result.answer) or "",
        final=final_id,
        effective_ttc=result.effective_ttc,
        schedule=list(result.schedule),
        model=result.model,
        preset=result.preset,
        ground_truth=expected,
    )
    for rnd in result.rounds:
        for t in rnd:
            answer = "" if t.failed else (extract_final_answer(t.content) or "")
            attrs: dict[str, Any] = {
                "round": t.round,
                "index": t.index,
                "completion_tokens": t.completion_tokens,
                "prompt_tokens": t.prompt_tokens,
                "latency_s": t.latency_s,
                "finish_reason": t.finish_reason or "",
                "failed": t.failed,
                "error": t.error or "",
                "truncated": t.truncated,
                "answer": answer,
                "message_chars": len(t.message or ""),
                "final": t.id == final_id,
            }
            if expected is not None and grader is not None:
                score = 0.0 if t.failed else _grade(grader, t.content, ground_truth)
                attrs["score"] = score
                attrs["correct"] = score >= 1.0
            if t.id in g:
                raise ValueError(f"the record has two trajectories named {t.id}")
            g.add_node(t.id, **attrs)
    for rnd in result.rounds:
        for t in rnd:
            if t.references and t.round == 0:
                raise ValueError(f"{t.id} is in the first round but has references")
            if len(set(t.references)) != len(t.references):
                raise ValueError(f"{t.id} references a message twice: {list(t.references)}")
            for position, ref in enumerate(t.references, start=1):
                source = trajectory_id(t.round - 1, ref)
                if source not in g:
                    raise ValueError(f"{t.id} references {source}, which is not in the record")
                if g.nodes[source]["failed"]:
                    raise ValueError(
                        f"{t.id} references {source}, which failed and so had no message"
                    )
                g.add_edge(source, t.id, position=position)
    return g
