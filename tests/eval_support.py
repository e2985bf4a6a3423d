"""The scripted model of the eval tests: it answers a problem right only for some inputs.

So every method gets a different accuracy that can be worked out by hand (see
:func:`respond`); every reply costs a fixed number of tokens, so the mean
effective TTC of each method is known too. Shared by the harness's tests
(tests/eval/test_harness.py) and ``pacore eval``'s (tests/cli/test_eval.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pacore_graph.eval.datasets import easy_arithmetic_problems
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SYNTHESIS_START = "You are given a problem and a list of reference responses."
EXPLORE_TOKENS = 10
SYNTH_TOKENS = 100
NO_RETRY = ModelRetryPolicy(max_attempts=1)

# --------------------------------------------------------------------------- scripted model

PROBLEMS = easy_arithmetic_problems(4, seed=0)
QUESTIONS = [p["messages"][0]["content"] for p in PROBLEMS]
ANSWERS = [int(p["ground_truth"]["answer"]) for p in PROBLEMS]
assert len(set(QUESTIONS)) == len(QUESTIONS)


def locate(text: str) -> int:
    """Which problem a prompt (a question, or a synthesis prompt quoting it) is about."""
    (index,) = [i for i, q in enumerate(QUESTIONS) if q in text]
    return index


def respond(req: ScriptedRequest) -> ScriptedReply:
    r"""Right or wrong by input only.

    An explorer (sample ``s`` of problem ``p``) is right iff ``(p + s) % 3 == 0``
    and otherwise answers ``answer + 1`` (so wrong samples agree with each
    other); a synthesis is right iff a reference holds ``\boxed{answer}``.
    Explorers cost 10 tokens, syntheses 100. Over problems 0..3 that gives:

    ========== =========================== ======== ====
    method     right on problems            accuracy TTC
    ========== =========================== ======== ====
    single     0, 3 (sample 0)              0.5      10
    majority:3 none (2 wrong votes beat 1)  0.0      30
    pacore:2   0, 2, 3 (samples 0, 1)       0.75     120
    pacore:2+1 as pacore:2, one more round  0.75     220
    refine:1   0, 3 (as single)             0.5      110
    pacore:low all (samples 0..3)           1.0      140
    ========== =========================== ======== ====
    """
    p = locate(req.last_user)
    answer = ANSWERS[p]
    if req.last_user.startswith(SYNTHESIS_START):
        right = f"\\boxed{{{answer}}}" in req.last_user
        value = answer if right else answer + 1
        return ScriptedReply(
            content=f"Having read the references: \\boxed{{{value}}}",
            reasoning="compare the references",
            completion_tokens=SYNTH_TOKENS,
        )
    value = answer if (p + req.sample_index) % 3 == 0 else answer + 1
    return ScriptedReply(
        content=f"The result is \\boxed{{{value}}}",
        reasoning="add it up",
        completion_tokens=EXPLORE_TOKENS,
    )


EXPECTED = {
    "single": (0.5, 10.0),
    "majority:3": (0.0, 30.0),
    "pacore:2": (0.75, 120.0),
    "pacore:2+1": (0.75, 220.0),
    "refine:1": (0.5, 110.0),
    "pacore:low": (1.0, 140.0),
}
REQUESTS_PER_RUN = {"single": 1, "majority:3": 1, "pacore:2": 2, "pacore:2+1": 3, "refine:1": 2}


def fail_problems(*bad: int) -> Callable[[ScriptedRequest], int | None]:
    """HTTP 500 for every request about one of the ``bad`` problems."""
    return lambda req: 500 if locate(req.last_user) in bad else None


def requested_problems(srv: ScriptedServer) -> list[int]:
    return sorted(locate(r.body["messages"][-1]["content"]) for r in srv.requests)


def report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return data


def result_lines(out: Path) -> list[dict[str, Any]]:
    lines = []
    for text in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines
