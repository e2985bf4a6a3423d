"""The synthesis prompt P(x, M): the problem plus the previous round's messages.

PaCoRe-8B was trained on inputs rendered from :data:`SYNTHESIS_TEMPLATE`, so
the default reproduces the public pipeline byte for byte: the same Jinja2
text, rendered with Jinja2's defaults, substituted for the conversation's last
user message while earlier messages are kept. Messages are shuffled with a
fixed seed first (order bias), after a stable sort so the permutation does not
depend on which explorer happened to finish first.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jinja2

__all__ = [
    "SYNTHESIS_TEMPLATE",
    "ChatMessage",
    "last_user_index",
    "order_references",
    "render_synthesis",
    "synthesis_messages",
]

ChatMessage = Mapping[str, Any]

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
    # uses; in particular it drops the single trailing newline.
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
