"""The OpenInference attributes beside the GenAI ones: what Phoenix and Langfuse show first.

Arize Phoenix converts ``gen_ai.*`` attributes to OpenInference at ingest, but
only for the operations it knows (``chat`` becomes an LLM span,
``invoke_agent`` an AGENT, ``execute_tool`` a TOOL); every other span,
``invoke_workflow`` included, stays of kind UNKNOWN, and its trace list shows
a trace's ``input.value`` / ``output.value`` (``--`` when there are none).
Langfuse picks a span's type from ``openinference.span.kind`` before
``gen_ai.operation.name``. So each PaCoRe span names its OpenInference kind
itself, and the run's root span carries the question and the answer as its
input and output (under the same content opt-in as messages).

Phoenix fills what a span leaves unset from the GenAI attributes (it never
overwrites): a chat span with ``gen_ai.response.model`` and no
``output.value`` gets ``{"model": "..."}`` as its output, which reads like
content and is not. Without content capture a chat span therefore says so in
``output.value`` with :data:`NOT_CAPTURED`, OpenInference's own marker for
content left out (its ``TraceConfig`` hides inputs and outputs with it).

Names and values are OpenInference's semantic conventions
(``openinference-semantic-conventions``), written out here so the core does
not depend on that package.
"""

from __future__ import annotations

__all__ = [
    "AGENT",
    "CHAIN",
    "INPUT_MIME_TYPE",
    "INPUT_VALUE",
    "JSON_MIME",
    "LLM",
    "NOT_CAPTURED",
    "OUTPUT_MIME_TYPE",
    "OUTPUT_VALUE",
    "SPAN_KIND",
    "TEXT_MIME",
    "TOOL",
]

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"

# Values of openinference.span.kind.
AGENT = "AGENT"
"""The run's root span: one PaCoRe run answering one question (and graph explorers)."""
CHAIN = "CHAIN"
"""A round, and a compaction: steps of the run that call no model themselves."""
LLM = "LLM"
"""One model call (a ``chat`` span)."""
TOOL = "TOOL"
"""One tool call of a tool-using explorer."""

TEXT_MIME = "text/plain"
JSON_MIME = "application/json"

NOT_CAPTURED = "__REDACTED__"
"""``output.value`` of a model call whose content was not captured (OpenInference's marker)."""
