"""The HTTP side of a model call: status policy, Retry-After, failures as errors, SSE events.

The pure rules are checked on their own (which statuses are retried and
which mean the whole server is busy, what a server's error event becomes,
what a stream event must be); then real connections on loopback (a refused
port, a trickling upstream) show that transport failures get their kind.
"""

from __future__ import annotations

import email.utils

import aiohttp
import pytest
from hostile_support import SMALL, ask, errors, hostile

from pacore_graph.errors import (
    MalformedReplyError,
    ModelCallError,
    UpstreamStatusError,
    UpstreamStreamError,
    UpstreamTimeoutError,
    UpstreamTransportError,
)
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.transport import (
    decode_event,
    http_error,
    parse_retry_after,
    retryable_status,
    stream_error,
    transport_errors,
)
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams

URL = "http://127.0.0.1:1/v1/chat/completions"


@pytest.mark.parametrize("status", [408, 409, 425, 429, *range(500, 600, 7)])
def test_busy_timeouts_and_server_errors_are_retried(status: int) -> None:
    assert retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_the_requests_own_faults_are_not_retried(status: int) -> None:
    """They would fail the same way again."""
    assert not retryable_status(status)


@pytest.mark.parametrize("status", [400, 429, 500, 503])
def test_an_http_error_carries_its_status_policy_and_a_short_body(status: int) -> None:
    body = b"  line one\n  line two  " + b"x" * 1000
    error = http_error(URL, status, body, retry_after="7")
    assert isinstance(error, UpstreamStatusError) and error.kind == "status"
    assert error.status == status and error.retryable == retryable_status(status)
    assert error.retry_after == 7.0
    assert error.server_wide == (status in (429, 503))  # only "the server is busy" is server-wide
    text = str(error)
    assert text.startswith(f"HTTP {status} from {URL}: line one line two")
    assert "\n" not in text and len(text) < len(body)  # the body's head, on one line
    assert "(empty body)" in str(http_error(URL, status, b"", None))


def test_parse_retry_after() -> None:
    """Delta-seconds or an HTTP date (relative to ``now``); nonsense is no value."""
    now = 1445412480.0
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("") is None
    assert parse_retry_after("soon") is None and parse_retry_after("nan") is None
    for ahead in (10, 0, -10):  # a date in the past is "now", never negative
        date = email.utils.formatdate(now + ahead, usegmt=True)
        assert parse_retry_after(date, now=now) == max(0, ahead)
    assert parse_retry_after("-5") == 0.0


@pytest.mark.parametrize(
    ("event", "status", "retryable"),
    [
        ({"error": {"message": "oom", "code": 503}}, 503, True),
        ({"error": {"message": "bad", "code": "400"}}, 400, False),
        ({"object": "error", "message": "flat", "code": 500}, 500, True),
        ({"error": {"message": "no code"}}, None, True),
        ({"error": {"message": "odd code", "code": "oops"}}, None, True),
        ({"error": {"message": "bool code", "code": True}}, None, True),
    ],
)
def test_a_mid_stream_error_event_becomes_its_error(
    event: dict[str, object], status: int | None, retryable: bool
) -> None:
    error = stream_error(event)
    assert error.retryable is retryable
    assert str(error).startswith("server reported an error mid-stream:")
    if status is None:
        assert type(error) is UpstreamStreamError and error.kind == "stream_error"
    else:
        assert isinstance(error, UpstreamStatusError) and error.status == status


def test_decode_event_returns_objects_and_raises_the_servers_error() -> None:
    assert decode_event(b'{"choices": []}') == {"choices": []}
    with pytest.raises(MalformedReplyError, match="invalid stream event"):
        decode_event(b"{not json")
    with pytest.raises(ModelCallError, match="not an object") as caught:
        decode_event(b"[1, 2]")
    assert caught.value.kind == "malformed"
    with pytest.raises(UpstreamStatusError) as error:
        decode_event(b'{"error": {"message": "boom", "code": 502}}')
    assert error.value.status == 502


@pytest.mark.parametrize(
    ("raised", "kind", "server_wide"),
    [
        (TimeoutError(), UpstreamTimeoutError, False),
        (aiohttp.ServerDisconnectedError(), UpstreamTransportError, False),
    ],
)
def test_transport_errors_become_retryable_errors_naming_the_url(
    raised: BaseException, kind: type[ModelCallError], server_wide: bool
) -> None:
    with pytest.raises(kind) as caught, transport_errors(URL, 2.5, "reading"):
        raise raised
    assert caught.value.retryable and caught.value.server_wide is server_wide
    assert URL in str(caught.value)


async def test_transport_and_timeout_failures_have_their_kind() -> None:
    refused = OpenAICompatClient(
        "http://127.0.0.1:9/v1", "m", retry=ModelRetryPolicy(max_attempts=1)
    )
    (error,) = errors(await refused.complete_each(ask("slow_body"), n=1, params=SMALL))
    await refused.aclose()
    assert error.kind == "transport"
    assert error.public_message() == "the upstream call failed: connection failed"
    params = SamplingParams(max_tokens=16, timeout=0.1)
    one = ModelRetryPolicy(max_attempts=1)
    async with hostile(drip_interval=0.05, retry=one) as (_server, client):
        (error,) = errors(await client.complete_each(ask("slow_body"), n=1, params=params))
    assert error.kind == "timeout"
