"""MultiChallenge: 273 multi-turn conversations, each judged against its own pass criterion.

The published file is ``data/benchmark_questions.jsonl`` of
github.com/ekwinox117/multi-challenge, one object per line: ``QUESTION_ID``,
``AXIS`` (instruction retention, inference memory, reliable version editing,
self-coherence), ``CONVERSATION`` (a list of ``{role, content}`` ending with a
user turn), ``TARGET_QUESTION`` (the YES/NO question the judge answers about
the final reply) and ``PASS_CRITERIA`` (the verdict that passes, ``YES`` or
``NO``). The hub mirror ``nmayorga7/multichallenge`` (split ``train``) keeps
the same columns (openbench's datasets/multichallenge.py reads them by these
names). Use ``multichallenge:benchmark_questions.jsonl`` on the published file.

The whole conversation is the prompt; the judge (``ground_truth["rubric"] ==
"multichallenge"``) asks ``target_question`` of the final answer and passes
it when the verdict equals ``answer`` (the pass criterion).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pacore_graph.eval.benchmarks.base import Benchmark, HubDataset, Skip, cell_text

__all__ = ["MULTICHALLENGE", "MultiChallengeBenchmark"]

_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class MultiChallengeBenchmark(Benchmark):
    """One record per conversation, judged with its pass criterion."""

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        question_id = cell_text(row, "QUESTION_ID").strip()
        conversation = row.get("CONVERSATION")
        if isinstance(conversation, str):  # some mirrors store it as JSON text
            try:
                conversation = json.loads(conversation)
            except ValueError:
                raise ValueError("column 'CONVERSATION' is text that is not JSON") from None
        if not isinstance(conversation, list) or not conversation:
            raise ValueError("column 'CONVERSATION' is not a non-empty list of messages")
        messages = []
        for i, message in enumerate(conversation):
            if not isinstance(message, Mapping):
                raise ValueError(f"CONVERSATION[{i}] is a {type(message).__name__}, not a message")
            role, content = message.get("role"), message.get("content")
            if role not in _ROLES or not isinstance(content, str):
                raise ValueError(f"CONVERSATION[{i}] is not a {{role, content}} message")
            messages.append({"role": role, "content": content})
        if messages[-1]["role"] != "user":
            raise ValueError("CONVERSATION does not end with a user turn")
        criterion = cell_text(row, "PASS_CRITERIA").strip().upper()
        if criterion not in ("YES", "NO"):
            raise ValueError(f"column 'PASS_CRITERIA' is {criterion!r}, not YES or NO")
        return {
            "id": question_id,
            "messages": messages,
            "ground_truth": {
                "answer": criterion,
                "target_question": cell_text(row, "TARGET_QUESTION").strip(),
                "rubric": "multichallenge",
            },
            "category": "judge",
            "axis": row.get("AXIS"),
        }


MULTICHALLENGE = MultiChallengeBenchmark(
    name="multichallenge",
    description="MultiChallenge, 273 multi-turn conversations (nmayorga7/multichallenge mirror)",
    hub=HubDataset("nmayorga7/multichallenge", split="train"),
    columns=("QUESTION_ID", "CONVERSATION", "TARGET_QUESTION", "PASS_CRITERIA"),
    optional_columns=("AXIS",),
)
