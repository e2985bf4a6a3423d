"""code_answer: the last fenced block of the conclusion, as LiveCodeBench extracts it."""

from __future__ import annotations

from pacore_graph.eval.code_answer import extract_code


def test_last_fenced_block_wins() -> None:
    answer = "first\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```\ndone"
    assert extract_code(answer) == "print(2)"


def test_block_written_while_thinking_does_not_count() -> None:
    answer = "<think>\n```python\nprint('draft')\n```\n</think>\nNo code in the end."
    assert extract_code(answer) is None
    answer = "<think>```python\nprint('draft')\n```</think>\n```\nprint('final')\n```"
    assert extract_code(answer) == "print('final')"


def test_no_block_or_an_empty_one_is_none() -> None:
    assert extract_code("the answer is 42") is None
    assert extract_code("```python\nprint(1)") is None  # an unclosed fence
    assert extract_code("```\n   \n```") is None


def test_fence_lines_are_never_code() -> None:
    answer = "```py\nimport sys\nprint(sys.stdin.read())\n```"
    assert extract_code(answer) == "import sys\nprint(sys.stdin.read())"
