r"""Competition math with a final answer: HMMT February 2025 and AIME 2025 (MathArena's copies).

MathArena publishes both as hub datasets with one layout (split ``train``):
``problem_idx`` (int), ``problem`` (LaTeX text), ``answer`` (text or int) and
``problem_type`` (a list of areas such as ``["Combinatorics"]``), as each
dataset card lists them under "Data Fields" and in its ``dataset_info``
features (huggingface.co/datasets/MathArena/hmmt_feb_2025/blob/main/README.md
and the same file of MathArena/aime_2025).
The prompt appends the instruction reasoning models are evaluated with
("Please reason step by step, and put your final answer within
\boxed{}."), the answer the ``math`` grader (math-verify) reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pacore_graph.eval.benchmarks.base import Benchmark, HubDataset, Skip, cell_text

__all__ = ["AIME25", "HMMT25", "MATH_INSTRUCTION", "MathArenaBenchmark"]

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True, slots=True)
class MathArenaBenchmark(Benchmark):
    """A MathArena competition: one record per problem, graded by answer equivalence."""

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        index = row.get("problem_idx")
        if isinstance(index, bool) or not isinstance(index, int | str) or str(index).strip() == "":
            raise ValueError(f"column 'problem_idx' is {index!r}, not a problem number")
        problem = cell_text(row, "problem")
        answer = cell_text(row, "answer")
        kinds = row.get("problem_type")
        if isinstance(kinds, str):
            kinds = [kinds]
        if kinds is not None and not (
            isinstance(kinds, list) and all(isinstance(k, str) for k in kinds)
        ):
            raise ValueError(f"column 'problem_type' is {type(kinds).__name__}, not a list")
        return {
            "id": f"{self.name}-{str(index).strip()}",
            "messages": [{"role": "user", "content": f"{problem}\n\n{MATH_INSTRUCTION}"}],
            "ground_truth": {"answer": answer.strip()},
            "category": "math",
            "problem_type": list(kinds or []),
        }


_COLUMNS = ("problem_idx", "problem", "answer")

HMMT25 = MathArenaBenchmark(
    name="hmmt25",
    description="HMMT February 2025, 30 problems (MathArena/hmmt_feb_2025)",
    hub=HubDataset("MathArena/hmmt_feb_2025", split="train"),
    columns=_COLUMNS,
    optional_columns=("problem_type",),
)

AIME25 = MathArenaBenchmark(
    name="aime25",
    description="AIME 2025 I and II, 30 problems (MathArena/aime_2025)",
    hub=HubDataset("MathArena/aime_2025", split="train"),
    columns=_COLUMNS,
    optional_columns=("problem_type",),
)
