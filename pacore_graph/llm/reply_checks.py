"""Checking the shape of an upstream's chat answer before anything is taken from it.

Why: the parsers trusted the JSON they were given. A choice index that was a
string, a ``message`` that was a list, usage ``Infinity`` or ``"lots"`` gave
80-line tracebacks; usage of ``-1999999999`` came out as a negative
"effective TTC"; 40 choices for ``n=4`` were cut to 4 and their tokens
under-counted. Each helper here either returns the value in the expected
type or raises ONE :class:`~pacore_graph.errors.ModelCallError` with
``kind="malformed"`` and a one-line cause (not retried: the server would
answer the same way).

Rules, the same for the JSON answer and the streamed events:

- ``choices`` is a list of objects; an index is an integer in ``0..n-1``
  (absent: the choice's position), never repeated in one answer, and there
  are at most ``n`` choices: extra choices are refused, not cut, because
  their tokens would otherwise be paid for and never counted;
- ``message`` / ``delta`` are objects; ``content`` and the reasoning fields
  are strings or null; ``finish_reason`` a string or null;
- token counts (``usage.prompt_tokens``, ``usage.completion_tokens``) are
  integers (an integral float such as ``12.0`` is accepted), non-negative
  and at most :data:`MAX_TOKENS_PER_SAMPLE` per sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.errors import MalformedReplyError

__all__ = [
    "MAX_TOKENS_PER_SAMPLE",
    "indexed_choices",
    "malformed",
    "object_field",
    "optional_list",
    "text_field",
    "token_count",
    "usage_of",
]

#: The largest token count a sample may report (2**24, about 16.7 million):
#: beyond any context window, small enough that sums stay meaningful.
MAX_TOKENS_PER_SAMPLE = 1 << 24


def _show(value: Any) -> str:
    """A short, one-line picture of a bad value (never the whole of a huge one)."""
    text = repr(value)
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def malformed(why: str) -> MalformedReplyError:
    """The one error for an answer of the wrong shape."""
    return MalformedReplyError(f"malformed reply from the server: {why}")


def token_count(usage: Mapping[str, Any], key: str, *, samples: int = 1) -> int:
    """``usage[key]`` as a checked token count (0 when absent or null)."""
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise malformed(f"usage.{key} is {_show(value)}, not a number of tokens")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise malformed(f"usage.{key} is {_show(value)}, not a number of tokens")
        value = int(value)
    bound = MAX_TOKENS_PER_SAMPLE * max(1, samples)
    if not 0 <= value <= bound:
        raise malformed(f"usage.{key} is {value}, outside 0..{bound}")
    return value


def usage_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``usage`` object of an answer or event (empty when absent or null)."""
    usage = data.get("usage")
    if usage is None:
        return {}
    if not isinstance(usage, Mapping):
        raise malformed(f"usage is {_show(usage)}, not an object")
    return usage


def object_field(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """``obj[key]`` as an object; absent or null is an empty one."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise malformed(f"{where}.{key} is {_show(value)}, not an object")
    return value


def text_field(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    """``obj[key]`` as a string or None."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise malformed(f"{where}.{key} is {_show(value)}, not a string")


def optional_list(obj: Mapping[str, Any], key: str, where: str) -> list[Any] | None:
    """``obj[key]`` as a list or None."""
    value = obj.get(key)
    if value is None or isinstance(value, list):
        return value
    raise malformed(f"{where}.{key} is {_show(value)}, not a list")


def indexed_choices(
    choices: Any, n: int | None, *, allow_repeats: bool = False
) -> list[tuple[int, Mapping[str, Any]]]:
    """``(index, choice)`` pairs of a ``choices`` list, checked, in index order.

    ``n`` is how many samples were asked for (None: unknown, no bound);
    ``allow_repeats`` is for streamed events, where one choice comes in many.
    """
    if not isinstance(choices, Sequence) or isinstance(choices, str | bytes):
        raise malformed(f"choices is {_show(choices)}, not a list")
    if n is not None and not allow_repeats and len(choices) > n:
        raise malformed(f"{len(choices)} choices for n={n}")
    out: list[tuple[int, Mapping[str, Any]]] = []
    seen: set[int] = set()
    for position, choice in enumerate(choices):
        if not isinstance(choice, Mapping):
            raise malformed(f"choice {position} is {_show(choice)}, not an object")
        index = choice.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            raise malformed(f"choice {position} has index {_show(index)}, not an integer")
        if index < 0 or (n is not None and index >= n):
            bound = "" if n is None else f" (n={n})"
            raise malformed(f"choice {position} has index {index}, out of range{bound}")
        if index in seen and not allow_repeats:
            raise malformed(f"choice index {index} appears twice")
        seen.add(index)
        out.append((index, choice))
    out.sort(key=lambda pair: pair[0])
    return out
