"""The synthesis prompt P(x, M): the problem plus the previous round's messages.

PaCoRe-8B was trained on inputs rendered from :data:`SYNTHESIS_TEMPLATE`, so
the default reproduces the public pipeline byte for byte: the same Jinja2
text, rendered with Jinja2's defaults, substituted for the conversation's last
user message while earlier messages are kept.

Which references are shown, and in what order, follows the public pipeline
(``pacore/batch_inference/base_exp.py``) by default (``reference_order =
"public"``): all K responses of the round, failed calls included as empty
content, are sorted by the length of their raw ``content`` (``<think>``
included), shuffled with ``random.Random(seed)``, then responses whose content
is empty are dropped and each remaining one passes on its message (the text
after the last ``</think>``; an empty conclusion stays an empty reference).
PaCoRe-8B was trained on prompts built exactly so. ``"compacted"`` is this
project's earlier rule: drop failed and empty messages first, then sort by
the compacted message's length and shuffle. Ties in the sort keep explorer
order (the public pipeline keeps arrival order, which is not reproducible).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pacore_graph.values.records import Trajectory

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "REFERENCE_ORDERS",
    "SYNTHESIS_TEMPLATE",
    "ChatMessage",
    "ReferenceOrder",
    "last_user_index",
    "order_references",
    "render_synthesis",
    "select_references",
    "synthesis_messages",
]

ChatMessage = Mapping[str, Any]

#: ``public``: the public pipeline's rule (the default); ``compacted``: sort the
#: compacted messages of successful trajectories only.
ReferenceOrder = Literal["public", "compacted"]
REFERENCE_ORDERS: tuple[ReferenceOrder, ...] = ("public", "compacted")

#: The protocol text, exactly as in the paper's public pipeline.
SYNTHESIS_TEMPLATE = """\
You are given a problem and a list of reference responses. Your job is to analyze these references and provide your own response.

Original Problem:
{{ original_prompt }}

Reference Responses:
{% for response in ref_responses %}
Reference {{ loop.index }}:
{{ response }}
{% endfor %}

Now, based on the original problem and reference responses above, please provide your own comprehensive solution.
"""  # noqa: E501


@lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    # jinja2.Template(...) with default settings is what the public pipeline
    # uses; in particular it drops the single trailing newline. Imported here:
    # round 0 renders nothing, so jinja2 loads after the first requests are out.
    import jinja2

    return jinja2.Template(template, undefined=jinja2.StrictUndefined)


def render_synthesis(
    original_prompt: str, references: Sequence[str], template: str = SYNTHESIS_TEMPLATE
) -> str:
    """Render the synthesis text for one problem and its reference messages."""
    return _compile(template).render(original_prompt=original_prompt, ref_responses=references)


def last_user_index(messages: Sequence[ChatMessage]) -> int:
    """Index of the conversation's last user message; ValueError if there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    raise ValueError("the conversation has no user message: PaCoRe needs a problem to solve")


def order_references(messages: Sequence[str], seed: int | None) -> list[int]:
    """The order (indices into ``messages``) in which references are shown.

    Like the public pipeline: sort by length, then shuffle with a fresh
    ``random.Random(seed)``. The sort makes the result independent of arrival
    order; ties keep explorer order. ``seed=None`` keeps explorer order.
    """
    order = list(range(len(messages)))
    if seed is None:
        return order
    order.sort(key=lambda i: len(messages[i]))
    random.Random(seed).shuffle(order)
    return order


def select_references(
    trajectories: Sequence[Trajectory],
    seed: int | None,
    order: ReferenceOrder = "public",
) -> tuple[tuple[int, ...], list[str]]:
    """The previous round's references for the next prompt: (explorer indices, texts).

    ``trajectories`` is one finished round, its messages already compacted.
    ``order="public"`` reproduces the public pipeline byte for byte (see the
    module docstring): a failed call is an empty content that takes part in
    the sort and the shuffle and is then dropped, and a response whose raw
    content is non-empty is kept even when its message is empty. ``seed=None``
    keeps explorer order under either rule.
    """
    by_index = sorted(trajectories, key=lambda t: t.index)
    if order == "public":
        raw = ["" if t.failed else (t.content or "") for t in by_index]
        shown = [i for i in order_references(raw, seed) if raw[i]]
        return (
            tuple(by_index[i].index for i in shown),
            [by_index[i].message or "" for i in shown],
        )
    if order == "compacted":
        usable = [t for t in by_index if not t.failed and t.message]
        picked = order_references([t.message or "" for t in usable], seed)
        return tuple(usable[i].index for i in picked), [usable[i].message or "" for i in picked]
    raise ValueError(f"reference order must be one of {', '.join(REFERENCE_ORDERS)}; got {order!r}")


def synthesis_messages(
    conversation: Sequence[ChatMessage],
    references: Sequence[str],
    template: str = SYNTHESIS_TEMPLATE,
) -> list[dict[str, Any]]:
    """The conversation with its last user message replaced by P(x, M).

    Round 0 sends the conversation as it is and does not call this; a later
    round whose references all came back empty still gets the template (with
    an empty list), as in the public pipeline.
    """
    out = [dict(m) for m in conversation]
    i = last_user_index(out)
    original = out[i].get("content")
    if not isinstance(original, str):
        raise ValueError("the last user message must have text content to be synthesised")
    out[i]["content"] = render_synthesis(original, references, template)
    return out
