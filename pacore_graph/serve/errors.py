"""OpenAI-style error answers: ``{"error": {"message", "type", "param", "code"}}``.

Clients (the ``openai`` SDK, LangChain) turn this shape into typed exceptions
with a readable message; a bare 500 or a traceback would reach the user as
noise. Types follow OpenAI's and vLLM's names.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from pacore_graph.errors import PaCoReError

__all__ = ["APIError", "error_body", "error_response"]

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


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(
        error_body(exc.status, exc.message, param=exc.param, code=exc.code),
        status_code=exc.status,
        headers=exc.headers,
    )
