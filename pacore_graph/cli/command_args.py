"""What ``pacore run`` and ``pacore eval`` run with: their flags, parsed once, as records.

``main`` turns the parser's ``argparse.Namespace`` into a :class:`RunArgs` or
:class:`EvalArgs` where it parses it (:func:`from_namespace`); the command
code after that point takes the record, never the namespace. Each holds
the resolved :class:`~pacore_graph.settings.env_settings.PaCoReSettings`
(flag > ``PACORE_*`` > default: the model options, read from ``settings``)
beside the command's own flags (files, ``--method``, ``--checkpoint``,
``--ray``...). Frozen and picklable: a ``--ray`` task carries one to its
worker, with its share's files put in by :func:`dataclasses.replace`.

A flag added to the parser is added here too; ``tests/cli/test_command_args.py``
holds the fields to the parser's destinations.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pacore_graph.settings.env_settings import PaCoReSettings

__all__ = ["EvalArgs", "RunArgs", "from_namespace"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunArgs:
    """``pacore run``: one ``question``, or the dataset ``input`` into ``output``.

    ``flags_given`` names the settings typed as flags (not read from
    ``PACORE_*``): a method setting no method of the run reads is refused
    only when typed (:func:`~pacore_graph.cli.common.check_method_settings`).
    """

    settings: PaCoReSettings
    flags_given: frozenset[str]
    question: str | None
    json: bool
    input: str | None
    since: date | None
    until: date | None
    output: Path | None
    template: Path | None
    method: str | None
    checkpoint: str | None
    checkpoint_timeout: float
    ray: str | None
    ray_workers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalArgs:
    """``pacore eval``: ``methods`` over ``dataset`` (or a ``suite``) into the folder ``out``."""

    settings: PaCoReSettings
    flags_given: frozenset[str]
    dataset: str | None
    since: date | None
    until: date | None
    methods: str
    samples: int
    out: Path
    grader: str | None
    grader_workers: int
    judge_base_url: str | None
    judge_model: str | None
    judge_rubric: str
    suite: str | None
    suite_dataset: list[str]
    limit: int | None
    checkpoint: str | None
    checkpoint_timeout: float
    ray: str | None
    ray_workers: int


_Args = TypeVar("_Args", RunArgs, EvalArgs)


def from_namespace(kind: type[_Args], args: argparse.Namespace) -> _Args:
    """The ``kind`` record of a namespace :func:`~pacore_graph.cli.common.resolve_settings` made.

    Every field is read by name; a namespace that lacks one (a parser and a
    record out of step) raises ``AttributeError`` rather than run on a default.
    """
    values: dict[str, Any] = {f.name: getattr(args, f.name) for f in dataclasses.fields(kind)}
    return kind(**values)
