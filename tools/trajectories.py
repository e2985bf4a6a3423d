"""Tools over one round's trajectories: list them, read one by range, search them all.

An aggregator that reads every trajectory whole (PaCoRe's synthesis prompt,
RSA's) is bounded by its context: N long trajectories do not fit. AggAgent
(Lee, Yen, Ye, Chen: "Agentic Aggregation for Parallel Scaling of
Long-Horizon Agentic Tasks", arXiv 2604.11753) treats the trajectories as an
environment instead, and gives the aggregating model a few cheap tools to
survey the answers, search for a claim and read the parts that matter
before it answers. These are such tools, over this project's
:class:`~pacore_graph.values.records.Trajectory` records (the agent is
:mod:`pacore_graph.graphs.aggagent`):

- ``list_trajectories(start=0)``: one JSON line per trajectory (index, length
  in characters and lines, the answer it commits to, how it finished, failed
  or not) after a tally of the answers;
- ``read_trajectory(index, start=0, end=None, unit="chars")``: a range of one
  trajectory's text, by characters or lines;
- ``search_trajectories(pattern, regex=False, indices=None)``: where a
  substring (case-insensitive) or a regular expression occurs, each hit with
  its trajectory, line, offset and a snippet.

A trajectory's text is its reasoning, its tool calls (a tool explorer's) and
its answer, under ``## reasoning``, ``## tool call k: NAME ARGS`` and
``## answer`` headers; the offsets of ``read_trajectory`` and the lengths of
``list_trajectories`` count in that text. A failed trajectory has no text:
the list says it failed and why.

Every result is bounded (:class:`TrajectoryToolLimits`): a result longer
than ``max_result_chars`` is cut with a note saying how to read on, a search
shows at most ``max_hits`` hits, and a regular expression (written by the
model) runs under a time limit, so a catastrophic pattern ends as an error
message, not a stalled run. A bad argument (an index out of range, a broken
pattern) raises ``ValueError``, which LangGraph's ``ToolNode`` gives back to
the model as the tool's error message.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import regex
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from pacore_graph.values.aggregation import extract_final_answer
from pacore_graph.values.records import Trajectory

__all__ = ["TrajectoryToolLimits", "make_trajectory_tools", "trajectory_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoryToolLimits:
    """How much one tool result may hold (characters), and how long a search may take."""

    max_result_chars: int = 4_000
    max_hits: int = 20
    snippet_chars: int = 160
    max_pattern_chars: int = 200
    search_timeout_s: float = 0.5

    def __post_init__(self) -> None:
        if self.max_result_chars < 200:
            raise ValueError(f"max_result_chars must be at least 200, got {self.max_result_chars}")
        if self.max_hits < 1:
            raise ValueError(f"max_hits must be at least 1, got {self.max_hits}")
        if not 20 <= self.snippet_chars <= self.max_result_chars:
            raise ValueError(
                f"snippet_chars must be in [20, max_result_chars], got {self.snippet_chars}"
            )
        if self.max_pattern_chars < 1 or self.search_timeout_s <= 0:
            raise ValueError("max_pattern_chars and search_timeout_s must be positive")


def trajectory_text(trajectory: Trajectory) -> str:
    """The text the tools read: reasoning, tool calls and answer under headers ("" if failed)."""
    if trajectory.failed:
        return ""
    parts: list[str] = []
    if trajectory.reasoning:
        parts.append(f"## reasoning\n{trajectory.reasoning}")
    for k, call in enumerate(trajectory.tool_calls, start=1):
        args = json.dumps(dict(call.arguments), ensure_ascii=False, sort_keys=True)
        result = call.output if call.error is None else f"error: {call.error}"
        parts.append(f"## tool call {k}: {call.name} {args}\n{result}")
    parts.append(f"## answer\n{trajectory.content}")
    return "\n".join(parts)


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _ListArgs(BaseModel):
    start: int = Field(0, ge=0, description="First position in the list (for long lists).")


class _ReadArgs(BaseModel):
    index: int = Field(description="The trajectory's index, as list_trajectories shows it.")
    start: int = Field(0, ge=0, description="First character (or line) to read, 0-based.")
    end: int | None = Field(
        None, ge=0, description="Where to stop, exclusive; omit to read as far as allowed."
    )
    unit: Literal["chars", "lines"] = Field(
        "chars", description="Whether start and end count characters or lines."
    )


class _SearchArgs(BaseModel):
    pattern: str = Field(description="Text to find (case-insensitive), or a regular expression.")
    regex: bool = Field(False, description="Read the pattern as a regular expression.")
    indices: list[int] | None = Field(
        None, description="Search only these trajectories; omit to search all."
    )


class _Round:
    """One round's trajectories, their texts computed once, and the tools' bodies."""

    def __init__(self, trajectories: Sequence[Trajectory], limits: TrajectoryToolLimits) -> None:
        self.limits = limits
        self.items = sorted(trajectories, key=lambda t: t.index)
        self.by_index = {t.index: t for t in self.items}
        if len(self.by_index) != len(self.items):
            raise ValueError("trajectories of one round must have distinct indices")
        self.texts = {t.index: trajectory_text(t) for t in self.items}

    def _get(self, index: int) -> Trajectory:
        found = self.by_index.get(index)
        if found is None:
            known = ", ".join(str(i) for i in self.by_index) or "none"
            raise ValueError(f"no trajectory {index}; the indices are {known}")
        return found

    def _cut(self, lines: list[str], note: Callable[[int, int], str]) -> str:
        """Lines joined up to the limit; if cut, ``note(first left out, how many)`` ends it."""
        out: list[str] = []
        size = 0
        for i, line in enumerate(lines):
            if size + len(line) + 1 > self.limits.max_result_chars - 120:
                out.append(note(i, len(lines) - i))
                break
            out.append(line)
            size += len(line) + 1
        return "\n".join(out)

    def listing(self, start: int = 0) -> str:
        answers: Counter[str] = Counter()
        rows: list[str] = []
        for t in self.items:
            answer = None if t.failed else extract_final_answer(t.content)
            if answer:
                answers[answer] += 1
            row: dict[str, object] = {"index": t.index}
            if t.failed:
                row.update(failed=True, error=_short(t.error or "", 120))
            else:
                text = self.texts[t.index]
                row.update(
                    chars=len(text),
                    lines=text.count("\n") + 1,
                    answer=_short(answer, 80) if answer else None,
                    finish=t.finish_reason,
                    failed=False,
                )
            rows.append(json.dumps(row, ensure_ascii=False))
        failed = sum(t.failed for t in self.items)
        tally = ", ".join(f"{_short(a, 40)!r} x{n}" for a, n in answers.most_common(10))
        head = [
            f"{len(self.items)} trajectories, {failed} failed. "
            f"Answers (most common first): {tally or 'none found'}."
        ]
        return self._cut(
            head + rows[start:],
            lambda i, left: f"... {left} more: call list_trajectories(start={start + i - 1})",
        )

    def read(self, index: int, start: int = 0, end: int | None = None, unit: str = "chars") -> str:
        t = self._get(index)
        if t.failed:
            return f"trajectory {index} failed and has no text: {_short(t.error or '', 200)}"
        text = self.texts[index]
        cap = self.limits.max_result_chars - 160
        if unit == "lines":
            lines = text.splitlines(keepends=True)
            stop = len(lines) if end is None else min(end, len(lines))
            if start >= len(lines) or stop <= start:
                return f"trajectory {index} has {len(lines)} lines; nothing in [{start}, {stop})"
            chunk, last = "", start
            for last in range(start, stop):
                if len(chunk) + len(lines[last]) > cap:
                    break
                chunk += lines[last]
            else:
                last = stop
            if not chunk:  # one line longer than a result: its beginning, then by characters
                offset = sum(len(line) for line in lines[:start])
                head = f"trajectory {index}, line {start} of {len(lines)} (its start):\n"
                return (
                    head
                    + lines[start][:cap]
                    + f"\n[line cut: read on with start={offset + cap}, unit='chars']"
                )
            more = f"\n[cut: read on with start={last}, unit='lines']" if last < stop else ""
            head = f"trajectory {index}, lines {start}-{last} of {len(lines)}:\n"
            return head + chunk + more
        stop = len(text) if end is None else min(end, len(text))
        if start >= len(text) or stop <= start:
            return f"trajectory {index} has {len(text)} characters; nothing in [{start}, {stop})"
        last = min(stop, start + cap)
        more = f"\n[cut: read on with start={last}]" if last < stop else ""
        head = f"trajectory {index}, characters {start}-{last} of {len(text)}:\n"
        return head + text[start:last] + more

    def search(self, pattern: str, regex_: bool = False, indices: list[int] | None = None) -> str:
        limits = self.limits
        if not pattern:
            raise ValueError("the pattern is empty")
        if len(pattern) > limits.max_pattern_chars:
            raise ValueError(f"the pattern is longer than {limits.max_pattern_chars} characters")
        try:
            compiled = regex.compile(pattern if regex_ else regex.escape(pattern), regex.IGNORECASE)
        except regex.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        targets = self.items if indices is None else [self._get(i) for i in indices]
        hits: list[str] = []
        total, where = 0, set()
        half = limits.snippet_chars // 2
        for t in targets:
            text = self.texts[t.index]
            try:
                for m in compiled.finditer(text, timeout=limits.search_timeout_s):
                    total += 1
                    where.add(t.index)
                    if len(hits) >= limits.max_hits:
                        continue
                    line = text.count("\n", 0, m.start())
                    a, b = max(0, m.start() - half), min(len(text), m.end() + half)
                    snippet = _short(text[a:b], limits.snippet_chars + 40)
                    hits.append(f"[{t.index}] line {line}, char {m.start()}: ...{snippet}...")
            except TimeoutError:
                raise ValueError(
                    f"the search took longer than {limits.search_timeout_s:g}s; "
                    "use a simpler pattern"
                ) from None
        if not total:
            return f"no match for {pattern!r} in {len(targets)} trajectories"
        head = f"{total} matches in {len(where)} trajectories; showing {len(hits)}:"
        return self._cut([head, *hits], lambda i, left: f"... {left} more hits not shown")


def make_trajectory_tools(
    trajectories: Sequence[Trajectory], limits: TrajectoryToolLimits | None = None
) -> list[BaseTool]:
    """The three tools over ``trajectories`` (one round's, any order; indices distinct)."""
    state = _Round(trajectories, limits or TrajectoryToolLimits())
    n = len(state.items)

    def list_trajectories(start: int = 0) -> str:
        return state.listing(start)

    def read_trajectory(
        index: int, start: int = 0, end: int | None = None, unit: str = "chars"
    ) -> str:
        return state.read(index, start, end, unit)

    def search_trajectories(
        pattern: str, regex: bool = False, indices: list[int] | None = None
    ) -> str:
        return state.search(pattern, regex, indices)

    cap = state.limits.max_result_chars
    return [
        StructuredTool.from_function(
            func=list_trajectories,
            name="list_trajectories",
            description=(
                f"List the {n} trajectories: each one's index, length, the answer it commits "
                "to, how it finished and whether it failed, after a tally of the answers."
            ),
            args_schema=_ListArgs,
        ),
        StructuredTool.from_function(
            func=read_trajectory,
            name="read_trajectory",
            description=(
                "Read part of one trajectory (its reasoning, tool calls and answer), from "
                f"start to end in characters or lines; at most {cap} characters per call."
            ),
            args_schema=_ReadArgs,
        ),
        StructuredTool.from_function(
            func=search_trajectories,
            name="search_trajectories",
            description=(
                "Find a text (case-insensitive) or a regular expression in the trajectories: "
                f"each hit's trajectory, line, offset and surrounding text (at most "
                f"{state.limits.max_hits} hits shown)."
            ),
            args_schema=_SearchArgs,
        ),
    ]
