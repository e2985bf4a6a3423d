"""What the OpenTelemetry GenAI conventions call things, and which provider a server is.

Attribute names come from the conventions package
(``opentelemetry-semantic-conventions``: the incubating ``gen_ai`` module and
the stable ``server``/``error`` ones), never from string literals here, so a
renamed attribute shows up as an import error instead of silently diverging
spans. Names of PaCoRe's own attributes (``pacore.*``) live with the spans.

``gen_ai.provider.name`` says *who serves the model*. The conventions list
well-known values for hosted APIs (``openai``, ``deepseek``, ``groq``, ...),
and :func:`provider_name` maps an API's host to them. A self-hosted
OpenAI-compatible server (llama.cpp, vLLM, SGLang, Ollama, the embedded
model) has no listed value, and it is *not* OpenAI: it is reported as
:data:`OPENAI_COMPATIBLE` unless the caller names it
(``TraceOptions(provider_name="vllm")``) or the client says what it is (a
``provider_name`` attribute on the client object).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MAX_TOKENS,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_SEED,
    GEN_AI_REQUEST_TEMPERATURE,
    GEN_AI_REQUEST_TOP_P,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_NAME,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_WORKFLOW_NAME,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT
from opentelemetry.semconv.schemas import Schemas

from pacore_graph.errors import ModelCallError, UpstreamStatusError

__all__ = [
    "CHAT",
    "ERROR_TYPE",
    "EXECUTE_TOOL",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_SEED",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_WORKFLOW_NAME",
    "INVOKE_AGENT",
    "INVOKE_WORKFLOW",
    "OPENAI_COMPATIBLE",
    "PROVIDER_BY_HOST",
    "SCHEMA_URL",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "UNKNOWN_ERROR_TYPE",
    "error_type",
    "provider_name",
    "server_address_and_port",
]

SCHEMA_URL = Schemas.V1_40_0.value
"""The conventions version the spans follow: the first with ``invoke_workflow``
(and ``gen_ai.provider.name``, which replaced ``gen_ai.system`` in 1.37)."""

# Values of gen_ai.operation.name. The package's enum class for them is marked
# deprecated (the GenAI conventions moved to their own repository), and
# touching it warns; the values themselves are unchanged.
CHAT = "chat"
INVOKE_AGENT = "invoke_agent"
INVOKE_WORKFLOW = "invoke_workflow"
EXECUTE_TOOL = "execute_tool"

OPENAI_COMPATIBLE = "openai_compatible"
"""``gen_ai.provider.name`` of a server the conventions have no value for: it
speaks OpenAI's API but is not OpenAI (llama.cpp, vLLM, SGLang, Ollama, ...)."""

PROVIDER_BY_HOST: dict[str, str] = {
    # host (or parent domain) -> the conventions' well-known gen_ai.provider.name
    "api.openai.com": "openai",
    "openai.azure.com": "azure.ai.openai",
    "services.ai.azure.com": "azure.ai.inference",
    "models.inference.ai.azure.com": "azure.ai.inference",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "api.anthropic.com": "anthropic",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "aiplatform.googleapis.com": "gcp.vertex_ai",
}
"""Hosts of hosted APIs with an OpenAI-compatible endpoint, by provider."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def server_address_and_port(base_url: str | None) -> tuple[str, int] | None:
    """``server.address`` and ``server.port`` of an API base URL (None when there is none).

    The port is the URL's, else the scheme's default, so a span always says
    where the call went (``http://127.0.0.1:8080/v1`` -> ``("127.0.0.1", 8080)``).
    """
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:  # a port that is not a number
        return None
    if port is None:
        port = _DEFAULT_PORTS.get(parts.scheme.lower())
    if port is None:
        return None
    return parts.hostname, port


def provider_name(base_url: str | None, *, declared: str | None = None) -> str:
    """``gen_ai.provider.name`` of a server: declared, else by host, else ``openai_compatible``.

    ``declared`` (from ``TraceOptions`` or the client) wins. Otherwise a known
    hosted API's host (or a subdomain of it, as Azure's per-resource hosts
    are) gives the conventions' value, and every other server, including
    any on loopback, is an OpenAI-compatible server that is not OpenAI.
    """
    if declared:
        return declared
    address = server_address_and_port(base_url)
    if address is None:
        return OPENAI_COMPATIBLE
    host = address[0].lower().rstrip(".")
    for known, value in PROVIDER_BY_HOST.items():
        if host == known or host.endswith("." + known):
            return value
    return OPENAI_COMPATIBLE


UNKNOWN_ERROR_TYPE = "_OTHER"
"""``error.type`` of a failure nothing more precise is known of (the conventions' fallback)."""

_STATUS_TEXT = re.compile(r"\AHTTP (\d{3})\b")
_CLASS_TEXT = re.compile(r"\A([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):")


def error_type(error: BaseException | str | None) -> str:
    """``error.type`` of a failed call: low-cardinality, so backends can group by it.

    An exception gives its HTTP status when it has one (``"500"``, as the
    HTTP conventions spell it): a :class:`~pacore_graph.errors.ModelCallError`'s
    ``status``, or the ``status_code`` the ``openai`` SDK's errors carry (a
    tool explorer calls its model through LangChain, which raises those);
    else a ``ModelCallError``'s ``kind`` (``"timeout"``, ``"transport"``, ...),
    else its class name. A
    trajectory keeps only its error's text, so text is read the same way:
    ``"HTTP 500 from http://...: body"`` is ``"500"`` and ``"ValueError: ..."``
    (how a raised exception is recorded) is ``"ValueError"``; anything else
    is :data:`UNKNOWN_ERROR_TYPE`, never the text itself (URLs, bodies and
    messages would make every failure its own group).
    """
    if error is None:
        return UNKNOWN_ERROR_TYPE
    if isinstance(error, BaseException):
        if isinstance(error, UpstreamStatusError):
            return str(error.status)
        if isinstance(error, ModelCallError) and error.kind != "other":
            return error.kind
        status = getattr(error, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
            return str(status)
        return type(error).__name__
    text = error.strip()
    status = _STATUS_TEXT.match(text)
    if status:
        return status.group(1)
    name = _CLASS_TEXT.match(text)
    if name and len(name.group(1)) <= 100 and not text.startswith(("http:", "https:")):
        return name.group(1)
    return UNKNOWN_ERROR_TYPE
