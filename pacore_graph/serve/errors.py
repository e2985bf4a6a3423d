"""Error answers: OpenAI's ``{"error": {"message", "type", "param", "code"}}``, and Anthropic's.

Clients (the ``openai`` SDK, LangChain) turn this shape into typed exceptions
with a readable message; a bare 500 or a traceback would reach the user as
noise. Types follow OpenAI's and vLLM's names. The Anthropic Messages API
(``/v1/messages``, :mod:`~pacore_graph.serve.messages_api`) answers the same
errors in its own shape, ``{"type": "error", "error": {"type", "message"}}``,
with Anthropic's type names and its 529 for an overloaded server (our 503), so
the ``anthropic`` SDK raises its own typed exceptions:
:func:`error_body_for` picks the shape by the request's path, for the
handlers and the body guard alike.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from pacore_graph.errors import PaCoReError

__all__ = [
    "ANTHROPIC_PATHS",
    "APIError",
    "anthropic_error_body",
    "anthropic_status",
    "error_body",
    "error_body_for",
    "error_response",
]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
}


#: Anthropic's error type names by status (its API reference's "Errors" table).
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}

#: Paths that answer in Anthropic's shape (the Messages API and what lies under it).
ANTHROPIC_PATHS = ("/v1/messages",)


class APIError(PaCoReError):
    """An error answer with its HTTP status; raised by handlers, rendered by the app."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(
                status, "server_error" if status >= 500 else "invalid_request_error"
            ),
            "param": param,
            "code": code if code is not None else str(status),
        }
    }


def anthropic_status(status: int) -> int:
    """The status an Anthropic client is sent: 529 (overloaded) for our 503, else the same."""
    return 529 if status == 503 else status


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error object; ``status`` is the one sent (:func:`anthropic_status`)."""
    kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _anthropic_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in ANTHROPIC_PATHS)


def error_body_for(
    path: str, status: int, message: str, *, param: str | None = None, code: str | None = None
) -> tuple[dict[str, Any], int]:
    """The error body and status a request to ``path`` gets (OpenAI's or Anthropic's)."""
    if _anthropic_path(path):
        sent = anthropic_status(status)
        return anthropic_error_body(sent, message), sent
    return error_body(status, message, param=param, code=code), status


def error_response(exc: APIError, path: str = "") -> JSONResponse:
    """``exc`` as the JSON answer of a request to ``path`` (its protocol's shape)."""
    body, status = error_body_for(path, exc.status, exc.message, param=exc.param, code=exc.code)
    return JSONResponse(body, status_code=status, headers=exc.headers)
