"""A majority vote's CPU: the keyed grouping against the old pairwise scan, in one run.

The vote groups extracted answers by equivalence (normalised text, exact
numbers, math-verify). The old routine compared each answer with every group
before it: up to K²/2 math-verify comparisons. The new one
(:func:`pacore_graph.values.answer_groups.group_answers`) keys each distinct
answer once and compares only answers whose keys meet. This measures both on
the same answer sets, in the same process, each from cold caches (math-verify's
parses and the keys are cached per text; the cache is cleared before every
repetition, after a warm-up that teaches math-verify's parser the shapes):

- ``int``: distinct integers (no math-verify at all in either routine);
- ``latex``: distinct LaTeX values (``\\sqrt{k}``, ``\\frac{\\pi}{k}``,
  ``k\\sqrt{2}``): math-verify for every comparison;
- ``text``: distinct words (``\\text{baaaing}``: math-verify reads a symbol);
- ``mixed``: equal values in several spellings (``k``, ``\\sqrt{k^2}``...
  without powers: ``\\sqrt{kk}``, ``x = k``, ``\\{k\\}``), K/4 values.

It prints per set the median CPU seconds of each routine, their ratio, and
the math-verify comparisons each made. The old scan over 256 distinct LaTeX
answers takes minutes, so it is measured at ``--old-n`` answers (default 64)
unless ``--full`` is given; the new routine is measured at both sizes.

    python benchmarks/bench_vote.py
    python benchmarks/bench_vote.py --n 256 --old-n 256 --repeats 3   # minutes
"""

from __future__ import annotations

import argparse
import os
import statistics
import string
import time
from collections.abc import Callable
from typing import Any

import math_verify

from pacore_graph.values import answers
from pacore_graph.values.answer_groups import group_answers, group_answers_pairwise
from pacore_graph.values.answer_keys import answer_key

Grouping = Callable[[list[str]], list[Any]]


def answer_sets(n: int, offset: int) -> dict[str, list[str]]:
    """The answer sets of size ``n``; ``offset`` shifts the values (a warm-up set differs)."""
    letters = string.ascii_lowercase
    latex = (
        lambda k: f"\\sqrt{{{k}}}",
        lambda k: f"\\frac{{\\pi}}{{{k}}}",
        lambda k: f"{k}\\sqrt{{2}}",
    )
    spellings = ("{k}", "\\sqrt{{{kk}}}", "x={k}", "\\{{{k}\\}}")
    return {
        "int": [str(17 * (k + offset) + 3) for k in range(n)],
        "latex": [latex[k % 3](k + offset + 2) for k in range(n)],
        "text": [
            "\\text{" + "".join(letters[(k + offset) // 26**i % 26] for i in range(4)) + "ing}"
            for k in range(n)
        ],
        "mixed": [
            spellings[j % 4].format(k=k + offset + 2, kk=(k + offset + 2) ** 2)
            for k in range(n // 4)
            for j in range(4)
        ],
    }


def clear_caches() -> None:
    answers._parsed.cache_clear()
    answer_key.cache_clear()


class Counter:
    """math-verify's ``verify`` calls while installed."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = math_verify.verify

    def __enter__(self) -> Counter:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self._real(*args, **kwargs)

        math_verify.verify = counted
        return self

    def __exit__(self, *exc: object) -> None:
        math_verify.verify = self._real


def measure(group: Grouping, texts: list[str], repeats: int) -> tuple[float, int, int]:
    """Median CPU seconds over ``repeats`` cold runs, comparisons of one run, groups."""
    cpu: list[float] = []
    calls = groups = 0
    for _ in range(repeats):
        clear_caches()
        with Counter() as counter:
            started = time.process_time()
            result = group(texts)
            cpu.append(time.process_time() - started)
        calls, groups = counter.calls, len(result)
    return statistics.median(cpu), calls, groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=256, help="distinct answers (default 256)")
    parser.add_argument("--old-n", type=int, default=64, help="answers the old scan gets")
    parser.add_argument("--repeats", type=int, default=3, help="cold runs per measure")
    parser.add_argument("--full", action="store_true", help="the old scan at --n too")
    args = parser.parse_args()
    old_n = args.n if args.full else args.old_n
    print(f"load: {os.getloadavg()[0]:.1f} (1-min average); medians of {args.repeats} cold runs")
    # Warm math-verify's parser on the same shapes with other values.
    warm = answer_sets(max(args.n, 64), 5000)
    for texts in warm.values():
        for text in texts[:64]:
            answers.symbolic_form(text)
    print(
        f"{'set':<6} {'n':>5} {'new CPU s':>10} {'cmp':>6} {'old n':>6} {'new@old n':>10} "
        f"{'old CPU s':>10} {'cmp':>7} {'old/new':>8}  groups"
    )
    sets = answer_sets(args.n, 0)
    for name, texts in sets.items():
        new_cpu, new_calls, groups = measure(group_answers, texts, args.repeats)
        head = texts[:old_n]
        small_cpu, _, small_groups = measure(group_answers, head, args.repeats)
        old_cpu, old_calls, old_groups = measure(group_answers_pairwise, head, args.repeats)
        assert small_groups == old_groups
        ratio = old_cpu / small_cpu if small_cpu > 0 else float("inf")
        print(
            f"{name:<6} {len(texts):>5} {new_cpu:>10.3f} {new_calls:>6} {len(head):>6} "
            f"{small_cpu:>10.3f} {old_cpu:>10.3f} {old_calls:>7} {ratio:>8.1f}  {groups}"
        )
    # majority:16 per problem, the case: 16 distinct answers.
    print("\nmajority:16 per problem (16 distinct answers), medians of 5 cold runs:")
    for name, texts in answer_sets(16, 7000).items():
        new_cpu, new_calls, _ = measure(group_answers, texts, 5)
        old_cpu, old_calls, _ = measure(group_answers_pairwise, texts, 5)
        print(
            f"  {name:<6} new {new_cpu:.3f} s ({new_calls} cmp)  old {old_cpu:.3f} s "
            f"({old_calls} cmp)  old/new {old_cpu / max(new_cpu, 1e-9):.1f}"
        )


if __name__ == "__main__":
    main()
