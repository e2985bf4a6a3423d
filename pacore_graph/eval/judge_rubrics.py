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
_HLE_LINE = re.compile(r"^[*_#>\s]*correct[*_\s]*:[*_\s]*(\w+)", re.IGNORECASE | re.MULTILINE)


def _json_field(text: str, key: str) -> str | None:
    """``key`` of the one JSON object the text is (fenced or bare), else None."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    value = lowered.get(key)
    return value.strip() if isinstance(value, str) else None


def parse_hle_verdict(text: str) -> Verdict:
    """``yes``/``no`` from the judge's ``correct:`` line; ``unparsed`` unless exactly one value.

    Two ``correct:`` lines that disagree, a value other than yes/no ("maybe",
    "partially"), or no such line at all are all unparsed. A JSON object with
    a ``correct`` field (structured output) is read the same way.
    """
    field = _json_field(text, "correct")
    values = [field] if field is not None else _HLE_LINE.findall(text)
    found = {v.strip().lower() for v in values}
    if len(found) == 1 and (value := found.pop()) in ("yes", "no"):
        return value  # type: ignore[return-value]
    return "unparsed"


_VERDICT_PREFIX = re.compile(r"^(?:final\s+)?verdict\s*[:=-]?\s*", re.IGNORECASE)


def parse_yes_no_verdict(text: str) -> Verdict:
    """``yes``/``no`` from the judge's last non-empty line (or a JSON ``verdict``); else unparsed.

    The prompt asks for the reasoning *followed by* the verdict, so the
    verdict is the last line: ``YES``, ``**NO**``, ``Verdict: YES.`` are
    read; a last line saying anything more ("YES and NO", "probably YES") is
    unparsed rather than guessed.
    """
    field = _json_field(text, "verdict")
    if field is not None:
        line = field
    else:
        lines = [ln for ln in text.splitlines() if ln.strip(_MARKUP)]
        if not lines:
            return "unparsed"
        line = lines[-1]
    line = _VERDICT_PREFIX.sub("", line.strip(_MARKUP)).strip(_MARKUP + ".!\"'")
    line = _VERDICT_PREFIX.sub("", line).strip(_MARKUP + ".!\"'")
    if line.upper() in ("YES", "NO"):
        return line.lower()  # type: ignore[return-value]
    return "unparsed"


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
