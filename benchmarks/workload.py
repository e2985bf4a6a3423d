"""What several benchmarks run: the same problems, and the floor's prompt for each round.

The floor (a bare asyncio loop doing PaCoRe's rounds, no framework) is the
baseline of ``bench_core``, ``bench_throughput`` and ``bench_fleet``: its
prompts must be rendered the same way in each, or their ratios stop being
comparable. Standard library only at import, so a benchmark's child process
pays for nothing it does not use.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["floor_prompt", "problems"]


def problems(count: int) -> list[str]:
    """``count`` distinct questions, the same in every benchmark that uses them."""
    return [
        f"Problem {i}: compute the sum of the first {i + 10} odd numbers." for i in range(count)
    ]


def floor_prompt(
    template: Any, question: str, messages: list[str], round_index: int
) -> list[dict[str, str]]:
    """Round ``round_index``'s prompt: the question, then the synthesis of the last messages.

    ``template`` is the ``jinja2.Template`` of PaCoRe's synthesis prompt; the
    references go shortest first, then shuffled with seed 42, as PaCoRe's
    public pipeline orders them.
    """
    if round_index == 0:
        return [{"role": "user", "content": question}]
    refs = sorted(messages, key=len)
    random.Random(42).shuffle(refs)
    text = template.render(original_prompt=question, ref_responses=refs)
    return [{"role": "user", "content": text}]
