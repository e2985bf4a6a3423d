"""The judge's fixed rubrics: the prompt per benchmark and the strict reading of its verdict.

- ``hle``: Humanity's Last Exam's published judge prompt
  (centerforaisafety/hle at 67b3251, ``hle_eval/run_judge_results.py``, ``JUDGE_PROMPT``),
  byte for byte, so our accuracy means what theirs does. The judge extracts
  the final answer and writes ``correct: yes`` or ``correct: no``.
- ``multichallenge``: MultiChallenge's published judge prompt
  (ekwinox117/multi-challenge, ``src/evaluator.py``, ``JUDGE_PROMPT``): the
  response is checked against the question's ``TARGET_QUESTION`` and must
  yield the verdict its ``PASS_CRITERIA`` names (``YES`` or ``NO``) to pass.

Both originals ask the judge for structured output (a JSON schema); an
arbitrary OpenAI-compatible server may not honour one, so we read the text
strictly instead (:func:`parse_hle_verdict`, :func:`parse_yes_no_verdict`):
exactly one verdict, stated where the rubric says, or the verdict is
``unparsed``, which never counts as correct.

The judge reads a response written by the model under test, which may quote
a verdict or ask the judge to end with one (issue 31). So the verdict is read
only from the judge's *own final* verdict line, in the rubric's format: HLE's
last ``correct:`` line, followed by nothing but its ``confidence:`` line;
MultiChallenge's last non-empty line. A block-quoted line (``> ...``) is
never the verdict. Any other verdict the reply states that disagrees (a
second ``correct:`` line, "NO is my verdict", "Verdict: NO" before a final
"YES"; text in double quotes, block quotes and code fences is a quotation and
does not count) makes the reply unparsed. A JSON reply is read only when it
is one object whose keys are unique, case aside: ``{"verdict": "NO",
"verdict": "YES"}`` is unparsed, not its last value. Ambiguity is never
resolved in the response's favour; unparsed scores 0 and is retried.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "HLE_JUDGE_PROMPT",
    "MULTICHALLENGE_JUDGE_PROMPT",
    "RUBRICS",
    "Rubric",
    "Verdict",
    "parse_hle_verdict",
    "parse_yes_no_verdict",
    "pass_criterion",
]

Verdict = Literal["yes", "no", "unparsed"]

HLE_JUDGE_PROMPT = """Judge whether the following [response] to [question] is correct or not based on the precise and unambiguous [correct_answer] below.

[question]: {question}

[response]: {response}

Your judgement must be in the format and criteria specified below:

extracted_final_answer: The final exact answer extracted from the [response]. Put the extracted answer as 'None' if there is no exact, final answer to extract from the response.

[correct_answer]: {correct_answer}

reasoning: Explain why the extracted_final_answer is correct or incorrect based on [correct_answer], focusing only on if there are meaningful differences between [correct_answer] and the extracted_final_answer. Do not comment on any background to the problem, do not attempt to solve the problem, do not argue for any answer different than [correct_answer], focus only on whether the answers match.

correct: Answer 'yes' if extracted_final_answer matches the [correct_answer] given above, or is within a small margin of error for numerical problems. Answer 'no' otherwise, i.e. if there if there is any inconsistency, ambiguity, non-equivalency, or if the extracted answer is incorrect.

confidence: The extracted confidence score between 0% and 100% from [response]. Put 100 if there is no confidence score available."""  # noqa: E501
"""HLE's judge prompt; ``{question}``, ``{response}``, ``{correct_answer}`` are filled in."""

MULTICHALLENGE_JUDGE_PROMPT = """You are tasked with evaluating a model response to see if it meets a specific criteria.
The criteria will always be YES/NO evaluation.

The model response is as follows:
<MODEL_RESPONSE>
{response}
</MODEL_RESPONSE>

The criteria that the model response must meet is as follows. Be VERY STRICT!:
<CRITERIA>
{criteria}
</CRITERIA>

Print your reasoning followed by your verdict, either "YES" or "NO"."""  # noqa: E501
"""MultiChallenge's judge prompt; ``{response}`` and ``{criteria}`` are filled in."""

_MARKUP = "*_`#> \t"
_CORRECT = r"[*_#\s]*correct[*_\s]*:[*_\s]*(\w+)"
_HLE_LINE = re.compile(rf"^{_CORRECT}", re.IGNORECASE)
_HLE_ANY_LINE = re.compile(rf"^[>\s]*{_CORRECT}", re.IGNORECASE)  # block quotes too
_HLE_TRAILER = re.compile(r"^[*_#\s]*confidence[*_\s]*:", re.IGNORECASE)
_AMBIGUOUS = object()


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        folded = str(key).lower()
        if folded in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[folded] = value
    return seen


def _json_field(text: str, key: str) -> str | object | None:
    """``key`` of the one JSON object the text is (fenced or bare); None when it is not one.

    :data:`_AMBIGUOUS` when the object repeats a key (any case): a later
    duplicate would silently win in ``json.loads``.
    """
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        data = json.loads(body, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        return _AMBIGUOUS if "duplicate key" in str(exc) else None
    if not isinstance(data, dict):
        return None
    value = data.get(key)
    return value.strip() if isinstance(value, str) else None


def parse_hle_verdict(text: str) -> Verdict:
    """``yes``/``no`` from the judge's own final ``correct:`` line; else ``unparsed``.

    The verdict is the last ``correct:`` line that is not block-quoted, and
    only ``confidence:`` lines may follow it (HLE's order: extracted answer,
    reasoning, correct, confidence). Unparsed: no such line, more after it
    (the line is then not the judge's closing verdict, e.g. one quoted from
    the response), any ``correct:`` line, quoted or not, that disagrees, a
    value other than yes/no ("maybe"). A JSON object with a ``correct`` field
    (structured output) is read the same way, unless a key repeats.
    """
    field = _json_field(text, "correct")
    if field is _AMBIGUOUS:
        return "unparsed"
    if isinstance(field, str):
        value = field.lower()
        return value if value in ("yes", "no") else "unparsed"  # type: ignore[return-value]
    lines = text.splitlines()
    said = {m.group(1).lower() for line in lines if (m := _HLE_ANY_LINE.match(line))}
    own = [i for i, line in enumerate(lines) if _HLE_LINE.match(line)]
    if len(said) != 1 or not own:
        return "unparsed"
    after = [line for line in lines[own[-1] + 1 :] if line.strip(_MARKUP)]
    if any(not _HLE_TRAILER.match(line) for line in after):
        return "unparsed"
    value = said.pop()
    return value if value in ("yes", "no") else "unparsed"  # type: ignore[return-value]


_VERDICT_PREFIX = re.compile(r"^(?:final\s+)?verdict\s*[:=-]?\s*", re.IGNORECASE)
_QUOTED = re.compile(r"```.*?(?:```|\Z)|\"[^\"\n]*\"|\u201c[^\u201d\n]*\u201d", re.DOTALL)
_STATED = re.compile(
    r"\bverdict\b\W{0,3}(?:is\W{0,3})?(YES|NO)\b"
    r"|\b(YES|NO)\b\W{0,3}(?:is|as)\s+(?:my|the)\s+(?:final\s+)?verdict\b",
    re.IGNORECASE,
)


def _verdict_line(line: str) -> str | None:
    """``YES``/``NO`` when ``line`` is a bare verdict line (``**NO**``, ``Verdict: YES.``)."""
    line = _VERDICT_PREFIX.sub("", line.strip(_MARKUP)).strip(_MARKUP + ".!\"'")
    line = _VERDICT_PREFIX.sub("", line).strip(_MARKUP + ".!\"'")
    return line.upper() if line.upper() in ("YES", "NO") else None


def _stated_verdicts(text: str) -> set[str]:
    """Every verdict the text states outside quotations: bare verdict lines and phrases."""
    found: set[str] = set()
    for line in _QUOTED.sub(" ", text).splitlines():
        if line.lstrip().startswith(">"):
            continue
        bare = _verdict_line(line)
        if bare is not None:
            found.add(bare)
        found.update((a or b).upper() for a, b in _STATED.findall(line))
    return found


def parse_yes_no_verdict(text: str) -> Verdict:
    """``yes``/``no`` from the judge's last non-empty line (or a JSON ``verdict``); else unparsed.

    The prompt asks for the reasoning *followed by* the verdict, so the
    verdict is the last line: ``YES``, ``**NO**``, ``Verdict: YES.`` are
    read; a last line saying anything more ("YES and NO", "probably YES"),
    a block-quoted one (``> Verdict: YES``), or a reply that states the other
    verdict anywhere outside quotation marks ("NO is my verdict ... Verdict:
    YES") is unparsed rather than guessed.
    """
    field = _json_field(text, "verdict")
    if field is _AMBIGUOUS:
        return "unparsed"
    if isinstance(field, str):
        value = _verdict_line(field)
        return value.lower() if value is not None else "unparsed"  # type: ignore[return-value]
    lines = [ln for ln in text.splitlines() if ln.strip(_MARKUP)]
    if not lines or lines[-1].lstrip().startswith(">"):
        return "unparsed"
    verdict = _verdict_line(lines[-1])
    if verdict is None or not _stated_verdicts(text) <= {verdict}:
        return "unparsed"
    return verdict.lower()  # type: ignore[return-value]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rubric:
    """One benchmark's judging: how to ask, how to read the answer, what passes.

    ``render(question, response, ground_truth)`` gives the judge's prompt;
    ``parse`` reads its verdict; ``passes(verdict, ground_truth)`` says
    whether that verdict scores 1.
    """

    name: str
    render: Callable[[str, str, Mapping[str, Any]], str]
    parse: Callable[[str], Verdict]
    passes: Callable[[Verdict, Mapping[str, Any]], bool]


def _hle_render(question: str, response: str, gt: Mapping[str, Any]) -> str:
    return HLE_JUDGE_PROMPT.format(
        question=question, response=response, correct_answer=str(gt.get("answer", ""))
    )


def _mc_render(question: str, response: str, gt: Mapping[str, Any]) -> str:
    return MULTICHALLENGE_JUDGE_PROMPT.format(response=response, criteria=_criterion(gt))


def _criterion(gt: Mapping[str, Any]) -> str:
    value = gt.get("target_question", gt.get("TARGET_QUESTION"))
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a MultiChallenge record needs its target_question")
    return value


def pass_criterion(gt: Mapping[str, Any]) -> Verdict:
    """The verdict a MultiChallenge response must get: ``yes`` or ``no``.

    Read from ``pass_criteria`` (or the dataset's ``PASS_CRITERIA``), else
    from ``answer``, where the dataset adapter puts it.
    """
    raw = next((gt[k] for k in ("pass_criteria", "PASS_CRITERIA", "answer") if k in gt), "")
    value = str(raw).strip().lower()
    if value not in ("yes", "no"):
        raise ValueError(f"a MultiChallenge pass criterion is YES or NO, got {value!r}")
    return value  # type: ignore[return-value]


RUBRICS: dict[str, Rubric] = {
    "hle": Rubric(
        name="hle",
        render=_hle_render,
        parse=parse_hle_verdict,
        passes=lambda verdict, gt: verdict == "yes",
    ),
    "multichallenge": Rubric(
        name="multichallenge",
        render=_mc_render,
        parse=parse_yes_no_verdict,
        passes=lambda verdict, gt: verdict != "unparsed" and verdict == pass_criterion(gt),
    ),
}
"""The rubrics by name; ``--judge-rubric`` picks one, else the record's fields decide."""
