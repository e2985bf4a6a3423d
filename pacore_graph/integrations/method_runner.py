"""A method by name over an OpenAI-compatible server: what other tools' plug-ins run.

An evaluation framework that hands PaCoRe one conversation at a time (Inspect
AI's model providers, :mod:`~pacore_graph.integrations.inspect_provider`) needs
three things from us: the method a name stands for, a run of it on one
conversation with that call's sampling settings, and a record of the run it
can store. :class:`MethodRunner` is that, built from the project's own parts
so nothing is redefined:

- names are read by the one grammar (:mod:`pacore_graph.settings.grammar`):
  every name ``pacore serve`` answers to (``pacore-high``, ``pacore:8,2``,
  ``rsa:N,K,T``, ``deepconf-online:N``, ``majority:N``, a bare family for its
  default) and every ``pacore eval`` method spec (``single``, ``refine:R``,
  ``pacore:low``, ...): a family added there is runnable here;
- the graph is :func:`~pacore_graph.eval.methods.build_method_graph`'s, the
  one ``pacore eval`` runs, compiled once per runner; a call's own settings
  (temperature, ``max_tokens``, seed, ...) are that run's LangGraph context,
  as ``pacore serve`` passes a request's;
- the settings are the command line's (:func:`~pacore_graph.settings.env_settings.load_settings`):
  given values, else ``PACORE_*`` variables, else defaults.

:func:`run_record` is the run as plain JSON: its rounds' widths, each
trajectory's answer and tokens, the effective test-time compute (TTC).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.settings.grammar import (
    METHODS,
    MethodSpec,
    parse_method,
    parse_served_model,
)
from pacore_graph.values.answers import extract_answer, problem_text
from pacore_graph.values.records import PaCoReResult

__all__ = ["MethodRunner", "parse_method_name", "run_record"]


def parse_method_name(name: str) -> MethodSpec:
    """The method ``name`` runs: a served model name, else a ``pacore eval`` method spec.

    ValueError lists both grammars' forms when it is neither.
    """
    text = name.strip()
    try:
        return parse_served_model(text)
    except ValueError as served:
        try:
            return parse_method(text)  # single, refine:R, pacore:low, ...
        except ValueError as spec:
            if text.partition(":")[0] in METHODS:
                raise  # a family with bad arguments (rsa:4,5,1): its own message
            forms = ", ".join(form for _, form in METHODS.values())
            raise ValueError(f"{served}; or a method spec: {forms}") from spec


def _answer_of(text: str | None, problem: str | None) -> str | None:
    if not text:
        return None
    found = extract_answer(text, problem=problem)
    return found.text if found is not None else None


def run_record(
    result: PaCoReResult, method: MethodSpec, messages: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A run as plain JSON for another tool's log: shape, per-trajectory answers, TTC.

    ``widths`` are the rounds as they ran (a token budget may shrink one);
    each trajectory's ``answer`` is what its message commits to (the
    project's one answer extractor; None when it commits to nothing or
    failed). ``messages`` (the problem) lets the extractor tell a restated
    question from an answer.
    """
    problem = problem_text(list(messages)) if messages else None
    rounds = [
        [
            {
                "id": t.id,
                "answer": None if t.failed else _answer_of(t.message or t.content, problem),
                "completion_tokens": t.completion_tokens,
                "prompt_tokens": t.prompt_tokens,
                "finish_reason": t.finish_reason,
                "failed": t.failed,
                "references": list(t.references),
            }
            for t in rnd
        ]
        for rnd in result.rounds
    ]
    return {
        "method": method.text,
        "family": method.family,
        "widths": [len(rnd) for rnd in result.rounds],
        "schedule": list(result.schedule),
        "answer": result.answer,
        "effective_ttc": result.effective_ttc,
        "ttc_per_round": list(result.ttc_per_round),
        "prompt_tokens": sum(t.prompt_tokens for t in result.trajectories),
        "failures": result.failures,
        "truncations": result.truncations,
        "wall_s": round(result.wall_s, 4),
        "rounds": rounds,
        **({"chosen": result.extra["chosen"]} if result.extra.get("chosen") else {}),
    }


class MethodRunner:
    """One method's compiled graph over one upstream client: run it on a conversation.

    ``settings`` are run settings by their flat names (``compactor``,
    ``max_concurrency``, ``retries``, ``rsa_final`` ...: any field of
    :class:`~pacore_graph.settings.env_settings.PaCoReSettings`);
    ``base_url`` (one URL, or several comma-separated) and ``model`` fall back
    to ``PACORE_BASE_URL`` and ``PACORE_MODEL``, the API key to
    ``PACORE_API_KEY`` / ``OPENAI_API_KEY``. Raises ValueError naming what is
    missing or wrong, before any call.
    """

    def __init__(
        self,
        method: str,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        from pydantic import ValidationError

        from pacore_graph.control.limits import SequenceLimiter
        from pacore_graph.eval.methods import build_method_graph
        from pacore_graph.llm.multi_client import chat_client_for
        from pacore_graph.settings.env_settings import (
            PaCoReSettings,
            format_settings_error,
            load_settings,
        )

        self.method = parse_method_name(method)
        given = dict(settings or {})
        unknown = sorted(set(given) - set(PaCoReSettings.model_fields))
        if unknown:
            raise ValueError(
                f"unknown setting(s) {', '.join(unknown)}; use names of pacore's options, "
                "e.g. compactor, max_concurrency, retries, timeout, rsa_final"
            )
        for name in ("preset", "rounds"):
            if name in given:
                raise ValueError(f"{name!r}: the method name gives the rounds ({self.method.text})")
        if base_url:
            given["base_url"] = [u.strip() for u in base_url.split(",") if u.strip()]
        if model:
            given["model"] = model
        if api_key:
            given["api_key"] = api_key
        try:
            loaded = load_settings(given, env)
            if not loaded.base_url:
                raise ValueError("no server: give its base URL (or set PACORE_BASE_URL)")
            if not loaded.model:
                raise ValueError("no model name: give the served model's name (or PACORE_MODEL)")
            self.config = loaded.to_config()
        except ValidationError as exc:
            raise ValueError(format_settings_error(exc)) from None
        self.base_urls = tuple(loaded.base_url)
        self.model = loaded.model
        self.client = chat_client_for(
            self.base_urls, self.model, api_key=loaded.api_key, retry=self.config.retry
        )
        self.graph = build_method_graph(
            self.method,
            self.client,
            config=self.config,
            compactor=loaded.compactor,
            limiter=SequenceLimiter(self.config.max_concurrency),
        )

    async def run(
        self, messages: Sequence[Mapping[str, Any]], context: Mapping[str, Any] | None = None
    ) -> PaCoReResult:
        """The method's run on ``messages`` (OpenAI-style dicts) with ``context``'s settings."""
        state = {"messages": [dict(m) for m in messages]}
        out = await self.graph.ainvoke(state, context=dict(context or {}))
        result: PaCoReResult = out["result"]
        return result

    async def aclose(self) -> None:
        await self.client.aclose()
