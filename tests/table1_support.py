"""Table 1's end-to-end pieces: a scripted model and judge answering by input, hub-format fixtures.

Shared by tests/eval/test_table1.py (the library and the example) and
tests/cli/test_suite.py (``pacore eval --suite table1``), so both assert the
same known table. The model's answer depends only on its input: a
first-round (or single, or majority) call answers HMMT's second problem,
the code problem, HLE and MultiChallenge wrongly; a synthesis call (its
prompt holds "Reference Responses:") answers them right; HMMT's first
problem is always right. Every reply is billed 40 completion tokens. The
judge's verdict depends only on whether the judged response says RIGHT.
"""

from __future__ import annotations

from pathlib import Path

from hub_fixtures import (
    hle_row,
    lcb_row,
    matharena_row,
    multichallenge_row,
    write_jsonl_rows,
    write_parquet,
)

from pacore_graph.testing.scripted_server import ScriptedReply, ScriptedRequest

__all__ = ["fixtures", "judge_reply", "model_reply", "parse_table"]

RIGHT_CODE = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG_CODE = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"


def model_reply(request: ScriptedRequest) -> ScriptedReply:
    text = request.last_user
    synthesis = "Reference Responses:" in text
    if "Solve problem sum." in text:
        content = RIGHT_CODE if synthesis else WRONG_CODE
    elif "What is 1+1?" in text:
        content = "\\boxed{2}"
    elif "What is 2+1?" in text:
        content = "\\boxed{3}" if synthesis else "\\boxed{5}"
    else:  # HLE and MultiChallenge: the judge reads RIGHT or WRONG
        content = "Answer: RIGHT" if synthesis else "Answer: WRONG"
    return ScriptedReply(content=content, completion_tokens=40)


def judge_reply(request: ScriptedRequest) -> ScriptedReply:
    text = request.last_user
    if "<MODEL_RESPONSE>" in text:
        judged = text.split("<MODEL_RESPONSE>")[1].split("</MODEL_RESPONSE>")[0]
        verdict = "YES" if "RIGHT" in judged else "NO"
        return ScriptedReply(content=f"Checked the constraint.\n{verdict}", completion_tokens=7)
    judged = text.split("[response]:")[1].split("Your judgement")[0]
    correct = "yes" if "RIGHT" in judged else "no"
    return ScriptedReply(
        content=f"extracted_final_answer: x\nreasoning: compared\ncorrect: {correct}",
        completion_tokens=9,
    )


def fixtures(root: Path) -> dict[str, str]:
    """One small local copy per benchmark, in the hub's own layout and encodings."""
    hmmt = write_parquet(
        [matharena_row(1, "What is 1+1?", "2"), matharena_row(2, "What is 2+1?", "3")],
        root / "hmmt_feb_2025" / "train.parquet",
    )
    sum_tests = [{"input": "5 7\n", "output": "12\n", "testtype": "stdin"}]
    lcb = write_jsonl_rows(
        [
            lcb_row(
                "sum",
                public=[{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}],
                private=sum_tests,
            )
        ],
        root / "code_generation_lite" / "test6.jsonl",
    )
    hle = write_parquet(
        [
            hle_row("h1", "Name the capital of the answer land.", "Answerville"),
            hle_row("h2", "What does the picture show?", "a cat", image="data:image/png;base64,AA"),
        ],
        root / "hle" / "test.parquet",
    )
    conversation = [
        ("user", "I am allergic to nuts."),
        ("assistant", "Noted."),
        ("user", "Now give me a recipe."),
    ]
    mc = write_jsonl_rows(
        [multichallenge_row("mc1", conversation, "Does the recipe avoid nuts?", "YES")],
        root / "benchmark_questions.jsonl",
    )
    return {
        "hmmt25": f"hmmt25:{hmmt}",
        "livecodebench": f"livecodebench:{lcb}",
        "hle": f"hle:{hle}",
        "multichallenge": f"multichallenge:{mc}",
    }


def parse_table(table: str) -> dict[tuple[str, str], list[str]]:
    """``table1.md``'s rows by (benchmark, method): the remaining cells, stripped."""
    rows: dict[tuple[str, str], list[str]] = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| benchmark"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[(cells[0], cells[1])] = cells[2:]
    return rows
