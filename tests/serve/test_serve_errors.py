"""serve/errors: an error answer in the OpenAI API's shape, its status and headers kept.

The ``openai`` SDK reads ``error.message``/``type``/``param``/``code`` and
picks its exception class by status; clients retry on ``Retry-After``. The
rendered response is decoded back from its bytes, as a client would.
"""

from __future__ import annotations

import json

import pytest

from pacore_graph.errors import PaCoReError
from pacore_graph.serve.errors import APIError, error_body, error_response


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (404, "not_found_error"),
        (413, "invalid_request_error"),
        (429, "rate_limit_error"),
        (502, "upstream_error"),
        (503, "service_unavailable"),
        (408, "invalid_request_error"),  # not listed: a 4xx is the caller's
        (500, "server_error"),  # not listed: a 5xx is the server's
        (504, "server_error"),
    ],
)
def test_the_type_follows_the_status(status: int, kind: str) -> None:
    assert error_body(status, "m")["error"]["type"] == kind


def test_the_code_defaults_to_the_status_and_param_to_none() -> None:
    assert error_body(429, "busy") == {
        "error": {"message": "busy", "type": "rate_limit_error", "param": None, "code": "429"}
    }
    body = error_body(400, "bad", param="temperature", code="invalid_value")["error"]
    assert (body["param"], body["code"]) == ("temperature", "invalid_value")


def test_the_response_carries_the_status_the_body_and_the_headers() -> None:
    exc = APIError(503, "queue timed out", headers={"Retry-After": "2"})
    response = error_response(exc)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.headers["content-type"] == "application/json"
    assert json.loads(bytes(response.body)) == error_body(503, "queue timed out")


def test_an_api_error_is_a_pacore_error_with_its_message() -> None:
    exc = APIError(404, "no such model", param="model")
    assert isinstance(exc, PaCoReError)
    assert str(exc) == exc.message == "no such model"
    assert exc.headers == {} and exc.code is None
