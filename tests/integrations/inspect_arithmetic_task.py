"""An Inspect task for the tests: a few easy-arithmetic questions, scored by their boxed answer.

The questions are the ones the scripted server's oracle responder answers
(``pacore_graph.testing.method_oracle``); the targets are their true answers.
Loaded by ``inspect eval`` (a real CLI run), so it imports only Inspect.
"""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import pattern
from inspect_ai.solver import generate

QUESTIONS = [(17, "+", 25), (50, "+", 98), (63, "-", 27), (12, "+", 9)]


def _target(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b


@task
def arithmetic() -> Task:
    samples = [
        Sample(
            id=f"q{i}",
            input=f"What is {a} {op} {b}? Put the final answer in \\boxed{{}}.",
            target=str(_target(a, op, b)),
        )
        for i, (a, op, b) in enumerate(QUESTIONS)
    ]
    return Task(dataset=samples, solver=generate(), scorer=pattern(r"boxed\{(-?\d+)\}"))
