"""The command-line flags of the settings: generated from the catalogue's rows.

Every command that talks to a model (``run``, ``eval``, ``swe``, and the
sampling part of ``serve``) takes the same options, and the served graph
(``graphs/pacore.py``) reads the same ones from ``PACORE_*`` variables. Each
is a row of :data:`~pacore_graph.settings.fields.SETTINGS` (help, type,
choices, the default the help states); this module only turns rows into
:class:`Option` values and says which commands list which, without importing
pydantic (``pacore --help`` stays fast).
:class:`pacore_graph.settings.env_settings.PaCoReSettings` -- the model that
resolves flag > ``PACORE_*`` variable > default -- is generated from the same
rows.

A flag's argparse default is always ``None`` (or absent for ``store_true``
flags), so "not given on the command line" can be told apart from "given
with the default value"; the default shown in the help is the row's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pacore_graph.settings.fields import (
    EMBEDDED_MAX_CONCURRENCY,
    EMBEDDED_MAX_TOKENS,
    ENV_PREFIX,
    LIMIT_NAMES,
    ROUND_CONTROL_NAMES,
    SETTINGS,
    env_name,
)
from pacore_graph.settings.grammar import split_widths

__all__ = [
    "EMBEDDED_MAX_CONCURRENCY",
    "EMBEDDED_MAX_TOKENS",
    "ENV_PREFIX",
    "LIMIT_OPTION_NAMES",
    "METHOD_SETTING_FAMILIES",
    "METHOD_SETTING_NAMES",
    "MODEL_OPTIONS",
    "ROUND_CONTROL_OPTIONS",
    "SAMPLING_OPTION_NAMES",
    "SHAPE_OPTIONS",
    "TEXT_GRAPH_ONLY",
    "Option",
    "add_options",
    "env_name",
]


def _rounds_arg(text: str) -> list[int]:
    try:
        return split_widths(text)  # bounds: PaCoReConfig, naming the field
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--{exc}") from None


@dataclass(frozen=True)
class Option:
    """One setting's flag: its type, default and help, and so its ``PACORE_*`` variable.

    ``default`` is what the settings model uses when neither the flag nor the
    variable is given (``None`` for a config setting: the config's own
    default applies); ``default_text`` is the default the help states.
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
    def of(cls, name: str, *, default_text: str | None = None) -> Option:
        """The flag of setting ``name``, all from its row (``default_text`` may restate
        the default for a command whose effective default differs)."""
        row = SETTINGS[name]
        if row.kind is bool:
            return cls(name, row.help, default=False, flag=True)
        return cls(
            name,
            row.help,
            type=None if row.kind is str else row.kind,
            default=row.default if row.path is None else None,
            default_text=default_text if default_text is not None else row.default_text(),
            repeatable=row.repeatable,
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
        kwargs: dict[str, Any] = {"dest": self.name, "help": self.help_text(), "default": None}
        if self.flag:
            kwargs["action"] = "store_true"
        else:
            if self.type is not None and self.type is not str:
                kwargs["type"] = self.type
            if self.repeatable:
                kwargs["action"] = "append"
            if self.choices is not None:
                kwargs["choices"] = list(self.choices)
            if self.metavar is not None:
                kwargs["metavar"] = self.metavar
        parser.add_argument(self.option_string, **kwargs)


#: The methods' own settings (PaCoRe's confidence options, RSA's answer, DeepConf's
#: share and window), each with the method families that read it (its row's
#: ``families``): only ``run`` and ``eval`` list them, and a flag none of a
#: command's methods reads is refused there.
METHOD_SETTING_FAMILIES: dict[str, tuple[str, ...]] = {
    name: row.families for name, row in SETTINGS.items() if row.families
}
METHOD_SETTING_NAMES = tuple(METHOD_SETTING_FAMILIES)

#: The run shape: a preset or explicit round widths (mutually exclusive flags).
SHAPE_OPTIONS: tuple[Option, ...] = (
    Option.of("preset"),
    replace(Option.of("rounds"), type=_rounds_arg),
)

#: Straggler control, early stop and the token budget: ``run`` and ``eval`` list them.
ROUND_CONTROL_OPTIONS: tuple[Option, ...] = tuple(Option.of(name) for name in ROUND_CONTROL_NAMES)

#: Options shared by every command that talks to a model, in help order: every
#: row with a flag but the shape and round control.
MODEL_OPTIONS: tuple[Option, ...] = tuple(
    Option.of(name)
    for name, row in SETTINGS.items()
    if row.flag and name not in ("preset", "rounds", *ROUND_CONTROL_NAMES)
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
LIMIT_OPTION_NAMES = LIMIT_NAMES

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

_BY_NAME = {o.name: o for o in SHAPE_OPTIONS + MODEL_OPTIONS + ROUND_CONTROL_OPTIONS}


def add_options(
    parser: argparse.ArgumentParser, names: Iterable[str] | None = None, *, shape: bool = False
) -> tuple[str, ...]:
    """Add the setting flags (all model options, or ``names``) to ``parser``; return the names.

    ``shape=True`` also adds ``--preset``/``--rounds`` as a mutually exclusive
    pair. The names are recorded on the parser's defaults (``settings_fields``,
    added to those of an earlier call), so ``main`` knows which settings this
    command resolves.
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
    earlier: tuple[str, ...] = parser.get_default("settings_fields") or ()
    parser.set_defaults(settings_fields=(*earlier, *added))
    return tuple(added)
