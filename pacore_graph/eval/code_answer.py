"""The program an answer commits to: the last fenced code block of its conclusion.

LiveCodeBench's own runner (``lcb_runner/utils/extraction_utils.py``,
``extract_code``) takes the lines between the last two lines that contain
three backticks, and an answer with fewer than two such lines has no code.
We apply the same rule to the answer's *conclusion* (the text after the last
``</think>``, as PaCoRe's compaction keeps it), so a draft written while
thinking and then revised never runs.

The fence lines themselves (``````python`` included) are never part of the
code. Like LiveCodeBench, a line that merely contains three backticks (in a
string literal, say) counts as a fence: matching its rule matters more than
rescuing such programs, because the benchmark's published scores use it.
"""

from __future__ import annotations

from pacore_graph.values.answers import split_conclusion

__all__ = ["FENCE", "extract_code"]

FENCE = "```"


def extract_code(answer: str) -> str | None:
    """The last fenced code block of ``answer``'s conclusion, or None when there is none.

    None (not an empty string) so a grader records "no code" apart from a
    program that runs and prints the wrong thing. A block holding only
    whitespace is also None.
    """
    conclusion = split_conclusion(answer)
    lines = conclusion.split("\n")
    fences = [i for i, line in enumerate(lines) if FENCE in line]
    if len(fences) < 2:
        return None
    code = "\n".join(lines[fences[-2] + 1 : fences[-1]])
    return code if code.strip() else None
