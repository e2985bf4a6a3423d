"""The API key: where it comes from, where it goes, and that it is never shown.

The key is sent in the ``Authorization`` header and nowhere else: not in a
client's ``repr``, not in any error a failed call raises (HTTP errors of any
status, a refused connection).
"""

from __future__ import annotations

import pytest
from llm_support import BOTH, PARAMS, SECRET, ClientFactory, closed_port, direct, graded, user

from pacore_graph.errors import ModelCallError
from pacore_graph.llm.credentials import API_KEY_ENV_VARS, resolve_api_key
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedServer


@pytest.fixture
def no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in API_KEY_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_an_explicit_key_wins_over_the_environment(no_key_in_env: pytest.MonkeyPatch) -> None:
    for name in API_KEY_ENV_VARS:
        no_key_in_env.setenv(name, f"from-{name}")
    assert resolve_api_key("given") == "given"


def test_the_environment_is_read_in_its_documented_order(
    no_key_in_env: pytest.MonkeyPatch,
) -> None:
    """Each variable is used when the ones before it are unset or empty."""
    for position, name in enumerate(API_KEY_ENV_VARS):
        for earlier in API_KEY_ENV_VARS[:position]:
            no_key_in_env.setenv(earlier, "")  # empty counts as unset
        no_key_in_env.setenv(name, f"from-{name}")
        for later in API_KEY_ENV_VARS[position + 1 :]:
            no_key_in_env.setenv(later, f"from-{later}")
        assert resolve_api_key() == f"from-{name}"
        assert resolve_api_key("") == f"from-{name}"  # an empty argument is no key


def test_no_key_anywhere_is_a_placeholder_local_servers_accept(
    no_key_in_env: pytest.MonkeyPatch,
) -> None:
    key = resolve_api_key()
    assert key and key not in {""}  # something is always sent
    assert all(key != f"from-{name}" for name in API_KEY_ENV_VARS)


@BOTH
async def test_api_key_goes_into_authorization_header(make_client: ClientFactory) -> None:
    async with ScriptedServer(graded) as srv, make_client(srv.base_url, api_key=SECRET) as c:
        await c.complete(user("k"), params=PARAMS)
        assert srv.requests[0].headers["authorization"] == f"Bearer {SECRET}"
        assert SECRET not in repr(c)


async def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACORE_API_KEY", "env-key-1")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-2")
    async with ScriptedServer(graded) as srv, direct(srv.base_url) as client:
        await client.complete(user("k"), params=PARAMS)
        assert srv.requests[0].headers["authorization"] == "Bearer env-key-1"


@pytest.mark.parametrize("status", [401, 400, 503])
async def test_api_key_never_in_error_messages(status: int) -> None:
    retry = ModelRetryPolicy(max_attempts=2, initial_backoff=0.0)
    async with (
        ScriptedServer(graded, fail_when=lambda req: status) as srv,
        direct(srv.base_url, api_key=SECRET, retry=retry) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("k"), params=PARAMS)
        assert srv.requests[0].headers["authorization"] == f"Bearer {SECRET}"
        assert info.value.status == status
        assert SECRET not in str(info.value)
        assert SECRET not in repr(info.value)


async def test_api_key_not_in_connection_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with direct(url, api_key=SECRET, retry=ModelRetryPolicy(max_attempts=1)) as client:
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("k"), params=PARAMS)
    assert "cannot reach" in str(info.value)
    assert SECRET not in str(info.value)
