"""A scripted model whose answers make the test-time methods' ranking known.

Why: comparing PaCoRe with its alternatives (``pacore eval --methods
single,majority:16,rsa:16,4,3,deepconf-online:16,pacore:medium``) on a real
small model says little (the embedded 135M model is near zero on arithmetic,
and one method's lead is noise). This responder stands in for a model whose
behaviour is *stated*, so the ranking each method should reach follows from
the rules below, and a run shows whether the methods, their accounting and
their plots do what they claim. It answers the ``pacore data
easy-arithmetic`` questions ("What is 50 + 98? ..."), by input only:

- **A first-round sample** (no references in the prompt) is right with
  probability ``p`` of its question (drawn per question in
  ``[accuracy - 0.1, accuracy + 0.1]``); a wrong one says ``truth + 1`` half
  the time (an attractive mistake, so a plain vote often fails) and
  ``truth + 2`` or ``truth + 3`` otherwise.
- **Its confidence** (DeepConf's per-token ``-mean(top-k logprobs)``, served
  as log-probabilities by :mod:`pacore_graph.testing.logprobs`): about 2.0
  per token; a wrong sample falters with probability 0.8 (from 30% of its
  length on, about 0.8 per token), a right one with probability 0.1.
- **A PaCoRe synthesis prompt** ("Reference Responses"): a model trained for
  synthesis, it is right with probability 0.95 when the true answer is among
  the references, else as a first-round sample.
- **An RSA aggregation prompt** (RSA's "candidate solution(s)" text): an
  untrained aggregator, it is right with probability ``0.3 + 0.6 * share``
  where ``share`` is the share of candidates with the true answer (0 when
  none has it: it then copies the most common candidate answer).
- **An aggregator agent** (a request offering the ``list_trajectories``
  tool, or carrying tool results; :mod:`pacore_graph.graphs.aggagent`): an
  untrained model that checks what it reads. With no tool result yet it
  calls ``list_trajectories``; with the list it reads the end of the first
  trajectory of each of the two most common listed answers
  (``read_trajectory``, from 300 characters before its end); with what it
  read it answers: right with probability 0.85 when the true answer was
  among those it read (it redoes the sum it reads), else (or when that check
  fails) the most common listed answer that is not the truth. A list with
  no answer in it (all failed) leaves it a first-round sample.

So, with the defaults: a single sample is right about 35% of the time; a
16-way vote about half the time; a confidence-filtered vote and online
DeepConf (which also stops faltering traces early, so spends fewer tokens)
well above the vote; RSA improves with its steps; the aggregator agent at 16
about 70% (it checks only the two most common answers, and the truth is not
always one of them);
PaCoRe's synthesis about 95%. ``tests/testing/test_method_oracle.py`` runs the comparison and checks
this order. Every draw is a hash of (question, prompt, seed, sample index),
never of call order, so give the run a seed (``pacore eval --seed 1``):
unseeded, the explorers of one round send the same input and, like any
by-input fake, get the same reply.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pacore_graph.testing.script import ScriptedReply, ScriptedRequest, ScriptedToolCall

__all__ = ["MethodOracle", "oracle_truth"]

_QUESTION = re.compile(r"What is (\d+) ([+\-×*]) (\d+)\?")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_PACORE_MARK = "Reference Responses:"
_RSA_MARKS = ("candidate solution", "Candidate solution")
_LIST_TOOL = "list_trajectories"
_READ_TOOL = "read_trajectory"
#: An agent that read the true answer's trajectory confirms it this often.
AGENT_CHECK = 0.85


def oracle_truth(text: str) -> int | None:
    """The true answer of the first easy-arithmetic question in ``text`` (None: none there)."""
    found = _QUESTION.search(text)
    if found is None:
        return None
    a, op, b = int(found.group(1)), found.group(2), int(found.group(3))
    return a + b if op == "+" else a - b if op == "-" else a * b


def _rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _answers(text: str) -> list[str]:
    """The non-empty ``\\boxed{}`` answers in ``text`` (the question's own is empty)."""
    return [a.strip() for a in _BOXED.findall(text) if a.strip()]


class MethodOracle:
    """The responder: ``ScriptedServer(MethodOracle())`` or ``--responder oracle``.

    ``accuracy`` is a first-round sample's mean chance of being right;
    ``words`` the mean length of a sample's reasoning in tokens (the scripted
    server counts words).
    """

    def __init__(self, accuracy: float = 0.35, words: int = 60) -> None:
        if not 0.1 <= accuracy <= 0.9:
            raise ValueError(f"accuracy must be in [0.1, 0.9]; got {accuracy}")
        if words < 4:
            raise ValueError(f"words must be at least 4; got {words}")
        self.accuracy = accuracy
        self.words = words

    def __call__(self, request: ScriptedRequest) -> ScriptedReply:
        agent = _is_agent(request)
        text = _question_turn(request) if agent else request.last_user
        found = _QUESTION.search(text)
        truth = oracle_truth(text)
        if found is None or truth is None:
            return ScriptedReply(content="I can only answer easy-arithmetic questions.")
        draw = _rng(text, request.seed, request.sample_index)
        p = self.accuracy - 0.1 + 0.2 * _rng("p", found.group(0)).random()
        references = _answers(text)
        if agent:
            reply = self._agent(request, truth, draw)
            if reply is not None:
                return reply
            right = draw.random() < p  # nothing listed to aggregate: a first sample
        elif _PACORE_MARK in text and references:
            right = draw.random() < (0.95 if str(truth) in references else p)
        elif any(mark in text for mark in _RSA_MARKS) and references:
            share = references.count(str(truth)) / len(references)
            if share == 0:
                answer = Counter(references).most_common(1)[0][0]
                return self._reply(draw, answer, right=False)
            right = draw.random() < 0.3 + 0.6 * share
        else:
            right = draw.random() < p
        if right:
            return self._reply(draw, str(truth), right=True)
        wrong = truth + 1 if draw.random() < 0.5 else truth + draw.choice((2, 3))
        return self._reply(draw, str(wrong), right=False)

    def _agent(
        self, request: ScriptedRequest, truth: int, draw: random.Random
    ) -> ScriptedReply | None:
        """The aggregator agent's step (the rule above); None when nothing was listed."""
        results = [_text(m.get("content")) for m in request.messages if m.get("role") == "tool"]
        if not results:
            return ScriptedReply(
                content="",
                reasoning="First, the answers they reached.",
                tool_calls=(ScriptedToolCall(_LIST_TOOL, {}),),
            )
        rows = _listed(results[0])
        tally = Counter(str(r["answer"]) for r in rows if r.get("answer"))
        if not tally:
            return None
        common = [answer for answer, _ in tally.most_common(2)]
        if len(results) == 1:
            reads = []
            for answer in common:
                row = next(r for r in rows if str(r.get("answer")) == answer)
                start = max(0, int(row.get("chars") or 0) - 300)
                reads.append(ScriptedToolCall(_READ_TOOL, {"index": row["index"], "start": start}))
            return ScriptedReply(
                content="",
                reasoning=f"Check {' and '.join(common)} where they are derived.",
                tool_calls=tuple(reads),
            )
        read = _answers(" ".join(results[1:]))
        if str(truth) in read and draw.random() < AGENT_CHECK:
            return self._reply(draw, str(truth), right=True)
        wrong = next((a for a, _ in tally.most_common() if a != str(truth)), str(truth + 1))
        return self._reply(draw, wrong, right=False)

    def _reply(self, draw: random.Random, answer: str, *, right: bool) -> ScriptedReply:
        n = max(4, int(self.words * draw.uniform(0.5, 1.5)))
        reasoning = " ".join(f"step{i}" for i in range(n - 1)) + f" {answer}"
        content = f"So the answer is \\boxed{{{answer}}}."
        tokens = n + len(content.split())
        confidence = [2.0 + draw.uniform(-0.3, 0.3) for _ in range(tokens)]
        if draw.random() < (0.1 if right else 0.8):
            for i in range(int(tokens * 0.3), tokens):
                confidence[i] = 0.8 + draw.uniform(-0.2, 0.2)
        return ScriptedReply(content=content, reasoning=reasoning, confidence=tuple(confidence))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _is_agent(request: ScriptedRequest) -> bool:
    """An aggregator agent's call: the list tool offered, or tool results in the conversation."""
    tools = request.params.get("tools") or ()
    offered = any(
        isinstance(t, Mapping) and (t.get("function") or {}).get("name") == _LIST_TOOL
        for t in tools
    )
    return offered or any(m.get("role") == "tool" for m in request.messages)


def _question_turn(request: ScriptedRequest) -> str:
    """The user turn that asks the question (an agent's last turn may be a note)."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            text = _text(message.get("content"))
            if _QUESTION.search(text):
                return text
    return request.last_user


def _listed(text: str) -> list[dict[str, Any]]:
    """The rows of a ``list_trajectories`` result (its JSON lines)."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "index" in row:
            rows.append(row)
    return rows
