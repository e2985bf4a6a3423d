"""The one formatter of invalid settings: every surface names a bad value its own way.

A bad setting fails as a pydantic ``ValidationError`` located at the config
field (``sampling.temperature``). People typed it under another name: the flag
``--temperature``, the variable ``PACORE_TEMPERATURE``, the context key
``context.temperature``, the request field ``'temperature'``. :func:`describe`
turns the error into one line, mapping each location back to the setting's
flat name (:data:`~pacore_graph.settings.fields.SETTINGS`) and labelling it
the way the surface's user knows it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pacore_graph.settings.fields import SETTINGS

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["describe", "first_setting", "setting_name"]

_BY_PATH = {row.path: name for name, row in SETTINGS.items() if row.path is not None}


def setting_name(loc: Sequence[Any]) -> str:
    """The flat setting name of an error location (``sampling.temperature`` -> ``temperature``).

    A location inside a list (``rounds.0``) names the list's setting; any
    other location is returned dotted.
    """
    parts = tuple(str(p) for p in loc)
    for end in range(len(parts), 0, -1):
        name = _BY_PATH.get(parts[:end])
        if name is not None:
            return name
    return ".".join(parts)


def _message(err: Any) -> str:
    return str(err.get("msg", "invalid")).removeprefix("Value error, ")


def describe(exc: ValidationError, *, label: Callable[[str], str] = str, prefix: str = "") -> str:
    """One line naming each bad setting by ``label(flat name)``; ``prefix`` leads it.

    Checks across fields (no location) keep their own message, which names
    the fields.
    """
    parts = []
    for err in exc.errors():
        loc = err.get("loc", ())
        if not loc:
            parts.append(_message(err))
            continue
        parts.append(f"{label(setting_name(loc))}: {_message(err)}")
    return prefix + "; ".join(parts)


def first_setting(exc: ValidationError) -> tuple[str, str]:
    """The first bad setting's flat name and message (a 400 names one field)."""
    err = exc.errors()[0]
    return setting_name(err.get("loc", ())), _message(err)
