"""The table of model options: each defined once, for argparse and the settings model.

Every command that talks to a model (``run``, ``eval``, ``swe``, and the
sampling part of ``serve``) takes the same options, and the served graph
(``graphs/pacore.py``) reads the same ones from ``PACORE_*`` variables. They
are declared here, once, as plain data: the parser is built from this table
without importing pydantic (``pacore --help`` stays fast), and
:class:`pacore_graph.settings.env_settings.PaCoReSettings` -- the pydantic-settings model
that resolves flag > ``PACORE_*`` environment variable > default -- declares
one field per row (a test keeps the two in step).

A flag's argparse default is always ``None`` (or absent for ``store_true``
flags), so "not given on the command line" can be told apart from "given
with the default value"; the default shown in the help is the table's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pacore_graph.otel.exporters import TRACE_KINDS
from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.grammar import split_widths
from pacore_graph.settings.request_limits import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_MAX_SAMPLES_PER_REQUEST,
    DEFAULT_MAX_TOKENS_CAP,
)

__all__ = [
    "EMBEDDED_MAX_CONCURRENCY",
    "EMBEDDED_MAX_TOKENS",
    "ENV_PREFIX",
    "LIMIT_OPTION_NAMES",
    "METHOD_SETTING_FAMILIES",
    "METHOD_SETTING_NAMES",
    "MODEL_OPTIONS",
    "SAMPLING_OPTION_NAMES",
    "SHAPE_OPTIONS",
    "TEXT_GRAPH_ONLY",
    "Option",
    "add_options",
    "env_name",
]

#: Every setting ``NAME`` is read from the environment variable ``PACORE_NAME``.
ENV_PREFIX = "PACORE_"

#: The embedded model is a 135M model on a CPU: without a cap it may ramble to
#: the end of its context, so runs on it default to this many tokens per call.
EMBEDDED_MAX_TOKENS = 256
#: The embedded server decodes up to 16 sequences together; more in flight only queue there.
EMBEDDED_MAX_CONCURRENCY = 16


def env_name(name: str) -> str:
    """``max_tokens`` -> ``PACORE_MAX_TOKENS``."""
    return ENV_PREFIX + name.upper()


def _rounds_arg(text: str) -> list[int]:
    try:
        return split_widths(text)  # bounds: PaCoReConfig, naming the field
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--{exc}") from None


def _shown(value: Any) -> str:
    """A default as the help states it (round widths as typed: ``4`` or ``32,4``)."""
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Option:
    """One model option: its flag, type, default and help, and so its ``PACORE_*`` variable.

    ``default`` is what the settings model uses when neither the flag nor the
    variable is given; ``default_text`` replaces it in the help where the
    effective default depends on something else (the embedded model).
    """

    name: str
    help: str
    type: Callable[[str], Any] | None = str
    default: Any = None
    default_text: str | None = None
    flag: bool = False  # store_true
    repeatable: bool = False  # action="append"
    choices: Sequence[str] | None = None
    metavar: str | None = None

    @classmethod
    def of(cls, name: str, *, default: Any = None, default_text: str | None = None) -> Option:
        """The flag of run setting ``name``: help, type, choices and shown default from its row.

        ``default`` is the settings model's (``None``: not given, the
        config's own default applies, and the help states that one).
        """
        row = SETTINGS[name]
        if row.kind is bool:
            return cls(name, row.help, flag=True)
        shown = default_text
        if shown is None:
            shown = row.unset if row.default is None else _shown(row.default)
        return cls(
            name,
            row.help,
            type=None if row.kind is str else row.kind,
            default=default,
            default_text=shown,
            choices=row.choices,
            metavar=row.metavar,
        )

    @property
    def option_string(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return env_name(self.name)

    def help_text(self) -> str:
        """The help, with where the value comes from and its default."""
        if self.flag:
            return f"{self.help} (or {self.env}=1)"
        default = self.default_text
        if default is None:
            default = "unset" if self.default is None else str(self.default)
        return f"{self.help} (env {self.env}; default: {default})"

    def add_to(self, parser: argparse.ArgumentParser | Any) -> None:
        """Add the flag to a parser or a mutually exclusive group of one."""
        kwargs: dict[str, Any] = {"dest": self.name, "help": self.help_text()}
        if self.flag:
            kwargs["action"] = "store_true"
            kwargs["default"] = None
        else:
            kwargs["default"] = None
            if self.type is not None and self.type is not str:
                kwargs["type"] = self.type
            if self.repeatable:
                kwargs["action"] = "append"
            if self.choices is not None:
                kwargs["choices"] = list(self.choices)
            if self.metavar is not None:
                kwargs["metavar"] = self.metavar
        parser.add_argument(self.option_string, **kwargs)


_PUBLIC = "the public pipeline's"

#: The methods' own settings (PaCoRe's confidence options, RSA's answer, DeepConf's
#: share and window), each with the method families that read it: only ``run`` and
#: ``eval`` list them, and a flag none of a command's methods reads is refused there.
METHOD_SETTING_FAMILIES: dict[str, tuple[str, ...]] = {
    "reference_filter": ("pacore",),
    "consensus_weight": ("pacore",),
    "rsa_final": ("rsa",),
    "deepconf_keep": ("deepconf", "deepconf-online"),
    "deepconf_window": ("deepconf", "deepconf-online"),
}
METHOD_SETTING_NAMES = tuple(METHOD_SETTING_FAMILIES)

#: The run shape: a preset or explicit round widths (mutually exclusive flags).
SHAPE_OPTIONS: tuple[Option, ...] = (
    Option.of("preset", default_text="low, unless --rounds is given"),
    replace(Option.of("rounds", default_text="the preset's widths"), type=_rounds_arg),
)

#: Options shared by every command that talks to a model, in help order.
MODEL_OPTIONS: tuple[Option, ...] = (
    Option(
        "base_url",
        "OpenAI-compatible server, e.g. http://localhost:8000/v1; repeat it (or separate "
        "URLs by commas in the variable) for several replicas of one model (samples go to "
        "the least loaded one)",
        repeatable=True,
        metavar="URL",
        default_text="start the embedded model",
    ),
    Option("model", "served model name (required with --base-url)"),
    Option(
        "api_key",
        "API key sent to the server",
        default_text="$OPENAI_API_KEY, else none",
    ),
    Option(
        "session_header",
        "HTTP header each request of one PaCoRe run carries the run's id in, so a "
        "session-aware router (Ray Serve LLM, llm-d) keeps the run on one replica; "
        "none to send no such header",
        default="x-session-id",
        metavar="NAME",
    ),
    Option.of("compactor", default=SETTINGS["compactor"].default),
    Option.of(
        "max_concurrency",
        default_text=f"{EMBEDDED_MAX_CONCURRENCY} on the embedded model, else "
        f"{SETTINGS['max_concurrency'].default}",
    ),
    Option.of(
        "temperature", default_text=f"{SETTINGS['temperature'].default}, the public pipeline's"
    ),
    Option.of("top_p", default_text=f"{SETTINGS['top_p'].default}, the public pipeline's"),
    Option.of(
        "max_tokens", default_text=f"{EMBEDDED_MAX_TOKENS} on the embedded model, unset otherwise"
    ),
    Option.of("timeout"),
    Option.of("seed"),
    Option.of("logprobs"),
    Option(
        "token_ids",
        "ask vLLM for completion token ids (return_token_ids), for RL export",
        flag=True,
    ),
    Option.of("shuffle_seed"),
    Option.of("reference_order"),
    *(Option.of(name) for name in METHOD_SETTING_NAMES),
    Option.of("retries"),
    Option.of("call_deadline", default_text="timeout x retries"),
    Option(
        "max_rounds",
        "cap on configured rounds per request (a final K=1 round is added)",
        type=int,
        default=DEFAULT_MAX_ROUNDS,
    ),
    Option(
        "max_samples_per_request",
        "cap on model calls of all rounds of one request (problem), final round included",
        type=int,
        default=DEFAULT_MAX_SAMPLES_PER_REQUEST,
    ),
    Option(
        "max_tokens_cap",
        "cap on max_tokens per call that a request (or --max-tokens) may ask for",
        type=int,
        default=DEFAULT_MAX_TOKENS_CAP,
    ),
    Option(
        "client",
        "direct aiohttp client (fast) or LangChain ChatOpenAI",
        choices=("direct", "langchain"),
        default="direct",
    ),
    Option("no_batch", "one request per explorer, not n=K", flag=True),
    Option(
        "trace",
        "OpenTelemetry export: console | otlp (OTEL_* env) | jaeger | langfuse",
        choices=tuple(TRACE_KINDS),
        default_text="OTEL_TRACES_EXPORTER if set, else none",
    ),
    Option(
        "trace_project",
        "project the spans are filed under (Arize Phoenix's openinference.project.name)",
        default="pacore",
    ),
    Option(
        "trace_content",
        "record prompts and completions in spans (off unless asked)",
        flag=True,
    ),
    Option("no_progress", "no progress bar", flag=True),
)

#: What only the text graph uses: ``swe`` does not list these (they would do nothing there).
TEXT_GRAPH_ONLY = frozenset(
    {
        "compactor",
        "logprobs",
        "token_ids",
        "client",
        "no_batch",
        "no_progress",
        "session_header",
        *METHOD_SETTING_NAMES,
    }
)

#: The per-request caps (:class:`pacore_graph.settings.request_limits.RequestLimits`).
LIMIT_OPTION_NAMES = ("max_rounds", "max_samples_per_request", "max_tokens_cap")

#: The options ``pacore serve`` shares with the other commands (its own
#: ``--model``, ``--api-key`` and ``--max-concurrency`` mean something else there).
SAMPLING_OPTION_NAMES = (
    "compactor",
    "temperature",
    "top_p",
    "max_tokens",
    "timeout",
    "retries",
    "call_deadline",
    *LIMIT_OPTION_NAMES,
    "trace",
    "trace_project",
    "trace_content",
)

_BY_NAME = {o.name: o for o in SHAPE_OPTIONS + MODEL_OPTIONS}


def add_options(
    parser: argparse.ArgumentParser, names: Iterable[str] | None = None, *, shape: bool = False
) -> tuple[str, ...]:
    """Add the model options (all, or ``names``) to ``parser``; return the names added.

    ``shape=True`` also adds ``--preset``/``--rounds`` as a mutually exclusive
    pair. The names are recorded on the parser's defaults (``settings_fields``),
    so ``main`` knows which settings this command resolves.
    """
    added: list[str] = []
    if shape:
        group = parser.add_mutually_exclusive_group()
        for option in SHAPE_OPTIONS:
            option.add_to(group)
            added.append(option.name)
    wanted = [o.name for o in MODEL_OPTIONS] if names is None else list(names)
    for name in wanted:
        _BY_NAME[name].add_to(parser)
        added.append(name)
    parser.set_defaults(settings_fields=tuple(added))
    return tuple(added)
