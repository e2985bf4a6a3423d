"""The client protocols: which clients satisfy them, and that the module stays light.

``ChatClient`` and ``SampleStreamingClient`` are ``runtime_checkable``: the
batcher and straggler control pick a path by ``isinstance``, so a shipped
client that stopped satisfying one would silently lose that path.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.multi_client import MultiEndpointClient
from pacore_graph.llm.protocols import ChatClient, SampleStreamingClient
from pacore_graph.testing.fake_client import FakeChatClient

URL = "http://127.0.0.1:1/v1"


async def test_the_direct_client_is_a_chat_and_a_streaming_client() -> None:
    client = OpenAICompatClient(URL, "m")
    try:
        assert isinstance(client, ChatClient) and isinstance(client, SampleStreamingClient)
    finally:
        await client.aclose()


async def test_the_multi_endpoint_client_is_a_chat_client() -> None:
    client = MultiEndpointClient([URL], "m")
    try:
        assert isinstance(client, ChatClient)
    finally:
        await client.aclose()


def test_the_fake_is_a_chat_client_only_as_far_as_it_goes() -> None:
    fake = FakeChatClient(model="fake")
    assert isinstance(fake, ChatClient)
    assert isinstance(fake, SampleStreamingClient) == hasattr(fake, "stream_each")


def test_a_chat_client_completes_per_sample_and_closes() -> None:
    class OnlyModel:
        model = "m"

    class CompleteOnly:
        model = "m"

        async def complete(self, messages: Any, **kwargs: Any) -> list[Any]:
            return []

    assert not isinstance(OnlyModel(), ChatClient)
    # The first form of the protocol: adapted where it is given (test_complete_only.py).
    assert not isinstance(CompleteOnly(), ChatClient)
    assert not isinstance(CompleteOnly(), SampleStreamingClient)


async def _method(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


MEMBERS = ("complete", "complete_each", "aclose", "__aenter__", "__aexit__")


@pytest.mark.parametrize("missing", MEMBERS)
def test_each_member_of_the_protocol_is_required(missing: str) -> None:
    """Nothing below the builder probes a client: what the protocol names, it must have."""
    members: dict[str, Any] = {name: _method for name in MEMBERS if name != missing}
    whole = type("Whole", (), {"model": "m", **dict.fromkeys(MEMBERS, _method)})
    partial = type("Partial", (), {"model": "m", **members})
    assert isinstance(whole(), ChatClient)
    assert not isinstance(partial(), ChatClient)


def test_the_protocols_import_no_transport() -> None:
    """Code that needs only the shape of a client must not pay for aiohttp."""
    code = "import sys, pacore_graph.llm.protocols; print('aiohttp' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
