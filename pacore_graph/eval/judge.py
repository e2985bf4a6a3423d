"""``--grader judge``: an LLM judge with a fixed rubric per benchmark, strict, retried, cached.

HLE and MultiChallenge are not graded by matching an answer: a judge model
reads the response and gives a verdict under the benchmark's published
rubric (:mod:`.judge_rubrics`). :class:`JudgeGrader` asks any
OpenAI-compatible server (``--judge-base-url``, ``--judge-model``; the key, if
any, from ``PACORE_JUDGE_API_KEY``) at temperature 0:

- **rubric**: ``hle`` or ``multichallenge``, or (the default, ``auto``)
  chosen per record: the ground truth's ``rubric`` field when it names one
  (the dataset adapters write it), else a ground truth with
  ``pass_criteria`` is MultiChallenge's and anything else HLE's (question,
  response, correct answer);
- **strict**: a verdict that cannot be read is ``unparsed``, which scores 0
  and is counted apart (``parsed=False``), never guessed as correct; so is
  a reply cut at ``max_tokens`` (``finish_reason`` ``length``), whose last
  line may be a quote of the response rather than the judge's verdict;
- **retried**: a failed call (transport error, 429 or 5xx, a malformed
  reply) or an unparsed verdict is asked again, up to ``attempts`` times
  with exponential back-off; a judge still unreachable gives a score-0,
  unparsed grade whose ``info["judge_verdict"]`` is ``"error"`` (graders
  never raise);
- **cached**: by (rubric, judge model, question, expected, response) in
  ``cache_path`` (the CLI puts ``judge-cache.jsonl`` in the eval's
  ``--out`` folder), so a resumed eval does not re-judge;
- **costed apart**: the judge's tokens go to ``info["judge_tokens"]``
  (the first time's cost for a cached verdict, with ``judge_cached``), never
  into the method's effective TTC.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pacore_graph.errors import PaCoReError
from pacore_graph.eval.grade import Grade, describe_error, ground_truth_answer
from pacore_graph.eval.judge_cache import CachedVerdict, JudgeCache, verdict_key
from pacore_graph.eval.judge_rubrics import RUBRICS, Rubric, Verdict, pass_criterion

__all__ = ["JUDGE_CACHE_FILE", "JudgeCallError", "JudgeGrader", "rubric_for"]

JUDGE_CACHE_FILE = "judge-cache.jsonl"
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class JudgeCallError(PaCoReError):
    """One judge call failed; ``retryable`` says whether asking again may help."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.retryable))


def rubric_for(ground_truth: Any, choice: str = "auto") -> Rubric:
    """The rubric for a record: ``choice`` unless ``auto``, else by the ground truth's fields."""
    if choice != "auto":
        if choice not in RUBRICS:
            raise ValueError(f"unknown judge rubric {choice!r}; choose {', '.join(RUBRICS)}")
        return RUBRICS[choice]
    named = ground_truth.get("rubric") if isinstance(ground_truth, Mapping) else None
    if isinstance(named, str) and named.strip().lower() in RUBRICS:
        return RUBRICS[named.strip().lower()]
    if isinstance(ground_truth, Mapping) and any(
        k in ground_truth for k in ("pass_criteria", "PASS_CRITERIA")
    ):
        return RUBRICS["multichallenge"]
    return RUBRICS["hle"]


class JudgeGrader:
    """Grades a response by asking a judge model (see the module docstring)."""

    name = "judge"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        rubric: str = "auto",
        cache_path: str | Path | None = None,
        attempts: int = 4,
        timeout_s: float = 120.0,
        backoff_s: float = 0.5,
        max_tokens: int | None = 4096,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"--judge-base-url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("the judge needs a model name (--judge-model)")
        if rubric != "auto" and rubric not in RUBRICS:
            raise ValueError(f"unknown judge rubric {rubric!r}; choose auto, {', '.join(RUBRICS)}")
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.rubric = rubric
        self.attempts = attempts
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_tokens = max_tokens
        self._api_key = api_key
        self.cache = JudgeCache(cache_path)

    def with_cache(self, cache_path: str | Path | None) -> JudgeGrader:
        """The same judge with its verdicts cached in ``cache_path`` (one per eval folder)."""
        return JudgeGrader(
            self.base_url,
            self.model,
            api_key=self._api_key,
            rubric=self.rubric,
            cache_path=cache_path,
            attempts=self.attempts,
            timeout_s=self.timeout_s,
            backoff_s=self.backoff_s,
            max_tokens=self.max_tokens,
        )

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        try:
            return self._grade(response, ground_truth, problem or "")
        except Exception as exc:  # the promise: never raise
            return Grade(
                0.0,
                False,
                detail=f"judge grader error: {describe_error(exc)}",
                info={"judge_verdict": "error"},
            )

    def _grade(self, response: str, ground_truth: Any, question: str) -> Grade:
        if not isinstance(response, str):
            raise TypeError(f"response must be a string, got {type(response).__name__}")
        gt: Mapping[str, Any] = (
            ground_truth if isinstance(ground_truth, Mapping) else {"answer": ground_truth}
        )
        rubric = rubric_for(ground_truth, self.rubric)
        if rubric.name == "multichallenge":
            target = str(gt.get("target_question", gt.get("TARGET_QUESTION", "")))
            expected = f"{target} => {pass_criterion(gt).upper()}"
        else:
            expected = ground_truth_answer(ground_truth) or ""
        prompt = rubric.render(question, response, gt)
        key = verdict_key(rubric.name, self.model, question, expected, response)
        cached = self.cache.get(key)
        if cached is not None:
            return self._graded(rubric, gt, cached, expected, cached=True, attempts=0)
        tokens, attempts, text, verdict = 0, 0, "", "unparsed"
        cut = False
        error: str | None = None
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            attempts += 1
            try:
                text, used, cut = self._call(prompt)
            except JudgeCallError as exc:
                error = str(exc)
                if not exc.retryable:
                    break
                continue
            error = None
            tokens += used
            verdict = "unparsed" if cut else rubric.parse(text)
            if verdict != "unparsed":
                break
        if error is not None:
            return Grade(
                0.0,
                False,
                expected=expected,
                detail=f"judge call failed after {attempts} attempt(s): {error}"[:500],
                info={
                    "judge_verdict": "error",
                    "judge_tokens": tokens,
                    "judge_cached": False,
                    "judge_rubric": rubric.name,
                    "judge_attempts": attempts,
                },
            )
        entry = CachedVerdict(verdict, tokens, text)
        if verdict != "unparsed":
            self.cache.put(key, entry)
        return self._graded(rubric, gt, entry, expected, cached=False, attempts=attempts, cut=cut)

    def _graded(
        self,
        rubric: Rubric,
        gt: Mapping[str, Any],
        entry: CachedVerdict,
        expected: str,
        *,
        cached: bool,
        attempts: int,
        cut: bool = False,
    ) -> Grade:
        verdict: Verdict = entry.verdict  # type: ignore[assignment]
        info = {
            "judge_verdict": verdict,
            "judge_tokens": entry.tokens,
            "judge_cached": cached,
            "judge_rubric": rubric.name,
            "judge_attempts": attempts,
        }
        if verdict == "unparsed":
            tail = entry.text.strip()[-200:]
            why = "cut at max_tokens" if cut else f"{rubric.name} rubric"
            return Grade(
                0.0,
                False,
                expected=expected,
                detail=f"judge verdict unparsed ({why}): {tail!r}"[:500],
                info=info,
            )
        passed = rubric.passes(verdict, gt)
        return Grade(
            1.0 if passed else 0.0,
            True,
            extracted=verdict,
            expected=expected,
            detail=f"judge ({rubric.name}) said {verdict}",
            info=info,
        )

    def _call(self, prompt: str) -> tuple[str, int, bool]:
        """The judge's reply text, its total tokens and whether it was cut at ``max_tokens``.

        Raises :class:`JudgeCallError` when there is no reply to read.
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                payload = json.loads(reply.read(8 * 1024 * 1024))
        except urllib.error.HTTPError as exc:
            raise JudgeCallError(
                f"judge answered HTTP {exc.code}", retryable=exc.code in _RETRY_STATUS
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise JudgeCallError(f"judge unreachable: {reason}", retryable=True) from None
        except ValueError:
            raise JudgeCallError("judge reply is not JSON", retryable=True) from None
        try:
            choice = payload["choices"][0]
            message = choice["message"]
            text = message.get("content") or ""
            cut = choice.get("finish_reason") == "length"
        except (KeyError, IndexError, TypeError, AttributeError):
            raise JudgeCallError("judge reply has no choices[0].message", retryable=True) from None
        usage = payload.get("usage") or {}
        tokens = usage.get("total_tokens")
        if not isinstance(tokens, int):
            tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        return str(text), tokens, cut
