"""Episode records: one trajectory of one round, as an RL sample.

The paper trains on single PaCoRe rounds: the state is the synthesis input
P(x, M), the action one trajectory, the reward the verified score of its
compacted message ("sparse terminal reward in [0, 1] from verifying the
compacted message"). An :class:`Episode` is that triple plus everything a
trainer or an analysis may need: where it came from (run, problem, round,
the ids of the messages it read), what the model produced (reasoning,
content, the compacted message), how it was graded, and what the server
reported (tokens, finish reason, token ids and log-probabilities).

Results files do not store prompts, so the prompt is rebuilt the way the
graph built it: round 0 sends the conversation; round r sends
``synthesis_messages(conversation, messages)`` where the messages are those
of round r-1 in the trajectory's ``references`` order, which the graph
recorded *after* its seeded shuffle. Rebuilding is therefore exact for the
default synthesis template; a run made with ``--template`` must be exported
with the same template.

Failed trajectories (``error`` set, no message) are not episodes: nothing was
generated. Both result shapes are read: ``pacore run --input`` lines (the
result's fields at the top level) and ``pacore eval`` lines (under
``result``); lines that carry an error are skipped and reported.

A user's own graph needs no results file: :func:`episodes_from_results` takes
the :class:`PaCoReResult` objects (or whole outputs) the graph returned and
makes the same episodes through the same :func:`episodes_from_run`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pacore_graph.eval.graders import (
    Grade,
    Grader,
    auto_grader,
    grade_response,
    ground_truth_answer,
)
from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.graph.streaming import answer_message_id
from pacore_graph.runs.jsonl import BadLine
from pacore_graph.runs.results_file import ResultLine, read_results
from pacore_graph.values.answers import problem_text
from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE, synthesis_messages
from pacore_graph.values.records import PaCoReResult, Trajectory, trajectory_id

__all__ = [
    "EPISODE_SCHEMA_VERSION",
    "Episode",
    "ResultRun",
    "SkippedLine",
    "chat_message",
    "episodes_from_results",
    "episodes_from_run",
    "iter_result_runs",
    "read_result_runs",
    "rebuild_prompts",
    "split_logprobs",
]

#: Bumped whenever a field is renamed, removed or changes meaning; readers
#: check it. Adding a field does not bump it.
EPISODE_SCHEMA_VERSION = 1

#: Fields stored as JSON text in rows: their shape varies between records
#: (a bare answer, ``{"answer": ...}``, test cases; arbitrary sampling
#: settings), and an Arrow/Parquet column needs one type for every row.
JSON_FIELDS = ("ground_truth", "sampling")


def _text(content: Any) -> str:
    """Message content as text (content blocks joined), ``""`` for none."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return "" if content is None else str(content)


def chat_message(message: Mapping[str, Any]) -> dict[str, str]:
    """A message reduced to ``{"role", "content"}`` text, TRL's conversational format.

    Episodes keep only these two keys so that every row of a dataset has the
    same prompt type (Arrow needs it); PaCoRe prompts are plain text turns.
    """
    return {"role": str(message.get("role", "")), "content": _text(message.get("content"))}


def split_logprobs(raw: Any) -> tuple[tuple[float, ...] | None, tuple[str, ...] | None]:
    """Per-token log-probabilities and tokens from what the server returned.

    Accepts the OpenAI chat shape (``{"content": [{"token", "logprob"}, ...]}``,
    what vLLM returns for ``logprobs: true``) and a bare list of numbers.
    Anything else, including no log-probabilities, is ``(None, None)``.
    """
    if isinstance(raw, Mapping):
        raw = raw.get("content")
    if not isinstance(raw, list) or not raw:
        return None, None
    if all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw):
        return tuple(float(x) for x in raw), None
    values: list[float] = []
    tokens: list[str] = []
    for entry in raw:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("logprob"), int | float):
            return None, None
        values.append(float(entry["logprob"]))
        tokens.append(str(entry.get("token", "")))
    return tuple(values), tuple(tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class Episode:
    """One trajectory of one round: state (prompt), action (completion), reward.

    ``reward`` is the grader's score of ``message`` (the compacted trajectory)
    against ``ground_truth``, or None when the problem has no ground truth.
    ``completion`` is the trajectory's content as the server returned it;
    with a reasoning parser the thinking is in ``reasoning`` (and the full
    generated text was ``<think>reasoning</think>completion``).
    ``input_message_ids`` name the messages in the prompt, in prompt order
    (``r0.3`` is trajectory 3 of round 0).
    """

    schema_version: int = EPISODE_SCHEMA_VERSION
    episode_id: str
    run_id: str
    problem_id: str
    method: str | None = None
    sample: int | None = None
    round: int
    index: int
    trajectory_id: str
    final_round: bool
    input_message_ids: tuple[str, ...] = ()
    prompt: tuple[Mapping[str, str], ...]
    completion: str
    reasoning: str | None = None
    message: str
    reward: float | None = None
    grader: str | None = None
    grade_parsed: bool | None = None
    grade_extracted: str | None = None
    grade_expected: str | None = None
    grade_detail: str = ""
    ground_truth: Any = None
    category: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    finish_reason: str | None = None
    truncated: bool = False
    tool_calls: int = 0
    model: str | None = None
    preset: str | None = None
    schedule: tuple[int, ...] = ()
    sampling: Mapping[str, Any] | None = None
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    logprob_tokens: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.reward is not None and not (math.isfinite(self.reward) and 0 <= self.reward <= 1):
            raise ValueError(f"an episode's reward must be in [0, 1] or None, got {self.reward!r}")

    def to_row(self) -> dict[str, Any]:
        """A JSON-ready row; ``ground_truth`` and ``sampling`` become JSON text.

        Keys are in field order, the same for every episode, so rows can go
        straight into ``datasets.Dataset.from_list`` or a JSONL file.
        """
        row: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in JSON_FIELDS:
                value = None if value is None else json.dumps(value, ensure_ascii=False)
            elif f.name == "prompt":
                value = [dict(m) for m in value]
            elif isinstance(value, tuple):
                value = list(value)
            row[f.name] = value
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Episode:
        """Inverse of :meth:`to_row`; refuses rows of a newer schema."""
        version = int(row.get("schema_version", EPISODE_SCHEMA_VERSION))
        if version > EPISODE_SCHEMA_VERSION:
            raise ValueError(
                f"episode schema version {version} is newer than this library's "
                f"{EPISODE_SCHEMA_VERSION}; upgrade pacore-graph to read it"
            )
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in row.items():
            if key not in known:
                continue
            if key in JSON_FIELDS and isinstance(value, str):
                value = json.loads(value)
            elif key == "prompt":
                value = tuple(chat_message(m) for m in value)
            elif isinstance(value, list):
                value = tuple(value)
            values[key] = value
        return cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultRun:
    """One successful run read from a results file, whichever command wrote it."""

    line: int
    problem_id: str
    run_id: str
    conversation: tuple[Mapping[str, Any], ...]
    result: PaCoReResult
    ground_truth: Any = None
    category: str | None = None
    method: str | None = None
    sample: int | None = None
    sampling: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


SkippedLine = BadLine
"""A results line that holds no usable run, and why (the one "bad line" class)."""


def _parse_run(entry: ResultLine, source: str) -> ResultRun:
    result = entry.result()  # ValueError for a failed run or a line with no result
    messages = entry.data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("no 'messages': the problem's conversation is needed to rebuild prompts")
    extra = result.extra if isinstance(result.extra, Mapping) else {}
    run_id = str(extra.get("run_id") or f"{source}:{entry.line}")
    data = entry.data
    sampling = data.get("sampling", extra.get("sampling"))
    category = data.get("category")
    return ResultRun(
        line=entry.line,
        problem_id=entry.problem_id,
        run_id=run_id,
        conversation=tuple(messages),
        result=result,
        ground_truth=data.get("ground_truth"),
        category=str(category) if category is not None else None,
        method=entry.method,
        sample=entry.sample if entry.is_eval else None,
        sampling=sampling if isinstance(sampling, Mapping) else None,
        raw=data,
    )


def iter_result_runs(path: str | Path) -> Iterator[ResultRun | SkippedLine]:
    """Each line of a results file as a :class:`ResultRun` or a :class:`SkippedLine`.

    The lines are read by the one results-file model
    (:mod:`pacore_graph.runs.results_file`); a run without a ``run_id`` is named
    by its file and line, so the same file read twice yields the same ids.
    """
    p = Path(path)
    source = str(p.resolve())
    for item in read_results(p):
        if isinstance(item, BadLine):
            yield item
            continue
        try:
            yield _parse_run(item, source)
        except ValueError as exc:
            yield SkippedLine(line=item.line, reason=str(exc) or type(exc).__name__)


def read_result_runs(path: str | Path) -> tuple[list[ResultRun], list[SkippedLine]]:
    """All runs of a ``pacore run`` / ``pacore eval`` results file, and the lines skipped."""
    runs: list[ResultRun] = []
    skipped: list[SkippedLine] = []
    for item in iter_result_runs(path):
        if isinstance(item, ResultRun):
            runs.append(item)
        else:
            skipped.append(item)
    return runs, skipped


def rebuild_prompts(
    conversation: Sequence[Mapping[str, Any]],
    result: PaCoReResult,
    template: str = SYNTHESIS_TEMPLATE,
) -> dict[str, tuple[tuple[Mapping[str, str], ...], tuple[str, ...]]]:
    """Each non-failed trajectory's prompt and input message ids, keyed by trajectory id.

    Raises ValueError when a trajectory references a message the previous
    round does not have (a corrupted or hand-edited record).
    """
    convo = normalize_conversation(list(conversation))
    base = tuple(chat_message(m) for m in convo)
    out: dict[str, tuple[tuple[Mapping[str, str], ...], tuple[str, ...]]] = {}
    cache: dict[tuple[int, ...], tuple[Mapping[str, str], ...]] = {}
    for r, rnd in enumerate(result.rounds):
        previous = {t.index: t for t in result.rounds[r - 1]} if r > 0 else {}
        for t in rnd:
            if t.failed:
                continue
            if r == 0:
                out[t.id] = (base, ())
                continue
            refs = tuple(t.references)
            prompt = cache.get(refs)
            if prompt is None:
                texts = []
                for i in refs:
                    ref = previous.get(i)
                    if ref is None or ref.message is None:
                        raise ValueError(
                            f"trajectory {t.id} references {trajectory_id(r - 1, i)}, "
                            "which has no message in the record"
                        )
                    texts.append(ref.message)
                rendered = synthesis_messages(convo, texts, template)
                prompt = tuple(chat_message(m) for m in rendered)
                cache[refs] = prompt
            out[t.id] = (prompt, tuple(trajectory_id(r - 1, i) for i in refs))
    return out


def _grade(
    trajectory: Trajectory, run: ResultRun, grader: Grader | None
) -> tuple[Grade | None, str | None]:
    gt = run.ground_truth
    if gt is None:
        return None, None
    chosen = grader or auto_grader(run.category)
    if grader is None and ground_truth_answer(gt) is None:
        return None, chosen.name  # no answer to compare against: ungraded, not wrong
    problem = problem_text(run.conversation)
    return grade_response(chosen, trajectory.message or "", gt, problem), chosen.name


def episodes_from_run(
    run: ResultRun,
    *,
    grader: Grader | None = None,
    template: str = SYNTHESIS_TEMPLATE,
    sampling: Mapping[str, Any] | None = None,
) -> list[Episode]:
    """Every non-failed trajectory of a run as a graded :class:`Episode`.

    ``grader`` defaults to the grader for the record's ``category`` (math
    unless it names another), as in ``pacore eval``. ``sampling`` fills in the
    sampling settings when the record does not carry them.
    """
    result = run.result
    prompts = rebuild_prompts(run.conversation, result, template)
    last = len(result.rounds) - 1
    settings = run.sampling if run.sampling is not None else sampling
    episodes: list[Episode] = []
    for r, rnd in enumerate(result.rounds):
        for t in rnd:
            if t.failed:
                continue
            prompt, input_ids = prompts[t.id]
            grade, grader_name = _grade(t, run, grader)
            values, tokens = split_logprobs(t.logprobs)
            episodes.append(
                Episode(
                    episode_id=f"{run.run_id}:{t.id}",
                    run_id=run.run_id,
                    problem_id=run.problem_id,
                    method=run.method,
                    sample=run.sample,
                    round=r,
                    index=t.index,
                    trajectory_id=t.id,
                    final_round=r == last,
                    input_message_ids=input_ids,
                    prompt=prompt,
                    completion=t.content,
                    reasoning=t.reasoning,
                    message=t.message or "",
                    reward=grade.score if grade is not None else None,
                    grader=grader_name,
                    grade_parsed=grade.parsed if grade is not None else None,
                    grade_extracted=grade.extracted if grade is not None else None,
                    grade_expected=grade.expected if grade is not None else None,
                    grade_detail=grade.detail if grade is not None else "",
                    ground_truth=run.ground_truth,
                    category=run.category,
                    prompt_tokens=t.prompt_tokens,
                    completion_tokens=t.completion_tokens,
                    tokens_estimated=t.tokens_estimated,
                    finish_reason=t.finish_reason,
                    truncated=t.truncated,
                    tool_calls=len(t.tool_calls),
                    model=result.model,
                    preset=result.preset,
                    schedule=tuple(result.schedule),
                    sampling=settings,
                    token_ids=t.token_ids,
                    logprobs=values,
                    logprob_tokens=tokens,
                )
            )
    return episodes


def _answer_position(messages: Sequence[Any], answer_id: str) -> int:
    """Where the run's answer message sits in an output's messages (their end if absent)."""
    for i, message in enumerate(messages):
        mid = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
        if mid == answer_id:
            return i
    return len(messages)


def _result_run(
    item: PaCoReResult | Mapping[str, Any],
    position: int,
    ground_truths: Mapping[str, Any] | None,
) -> ResultRun:
    """A run as a results line would give it, from a result or a graph's whole output."""
    output: Mapping[str, Any] = {}
    if isinstance(item, PaCoReResult):
        result = item
    elif isinstance(item, Mapping) and isinstance(item.get("result"), PaCoReResult):
        output, result = item, item["result"]
    else:
        raise TypeError(
            f"results[{position}] is {type(item).__name__}: give the PaCoReResult a PaCoRe "
            "graph returned (out['result']) or its whole output"
        )
    extra = result.extra if isinstance(result.extra, Mapping) else {}
    run_id = str(extra.get("run_id") or f"results[{position}]")
    convo: Sequence[Any] = result.conversation
    if not convo and output:
        messages = list(output.get("messages") or ())
        convo = messages[: _answer_position(messages, answer_message_id(run_id))]
    if not convo:
        raise ValueError(
            f"results[{position}] (run {run_id}) carries no conversation, and its prompts are "
            "rebuilt from it: give the graph's whole output (with its messages) instead"
        )
    problem_id = result.problem_id or run_id
    sampling = extra.get("sampling")
    return ResultRun(
        line=position,
        problem_id=problem_id,
        run_id=run_id,
        conversation=tuple(normalize_conversation(list(convo))),
        result=result,
        ground_truth=(ground_truths or {}).get(problem_id),
        sampling=sampling if isinstance(sampling, Mapping) else None,
    )


def episodes_from_results(
    results: Iterable[PaCoReResult | Mapping[str, Any]],
    *,
    ground_truths: Mapping[str, Any] | None = None,
    grader: Grader | None = None,
    template: str = SYNTHESIS_TEMPLATE,
    sampling: Mapping[str, Any] | None = None,
) -> list[Episode]:
    """Training episodes from the results a PaCoRe graph returned, as ``pacore export-episodes``.

    Each item is a :class:`PaCoReResult` (``out["result"]`` of
    ``build_pacore_graph(...).ainvoke``) or the whole output ``out`` (its
    ``messages`` before the answer are then the conversation, when the result
    does not carry it). The episodes are those :func:`episodes_from_run` makes
    from a results file holding the same runs: the same prompts, ids and
    grades. ``ground_truths`` maps a run's ``problem_id`` (its input's, else
    its run id) to the answer it is graded against; a run without one is
    ungraded (``reward`` None). ``grader``, ``template`` and ``sampling`` are
    :func:`episodes_from_run`'s. A run given twice is made into episodes
    once, as an export does.

    Raises TypeError for an item that is no result, ValueError for a result
    with no conversation or one whose rounds reference missing messages.
    """
    episodes: list[Episode] = []
    seen: set[str] = set()
    for position, item in enumerate(results):
        run = _result_run(item, position, ground_truths)
        if run.run_id in seen:
            continue
        seen.add(run.run_id)
        episodes.extend(episodes_from_run(run, grader=grader, template=template, sampling=sampling))
    return episodes
