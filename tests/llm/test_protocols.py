"""The client protocols: which clients satisfy them, and that the module stays light.

``ChatClient`` and ``SampleStreamingClient`` are ``runtime_checkable``: the
batcher and straggler control pick a path by ``isinstance``, so a shipped
client that stopped satisfying one would silently lose that path.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

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


def test_an_object_without_complete_is_not_a_chat_client() -> None:
    class OnlyModel:
        model = "m"

    class CompleteOnly:
        model = "m"

        async def complete(self, messages: Any, **kwargs: Any) -> list[Any]:
            return []

    assert not isinstance(OnlyModel(), ChatClient)
    assert isinstance(CompleteOnly(), ChatClient)
    assert not isinstance(CompleteOnly(), SampleStreamingClient)


def test_the_protocols_import_no_transport() -> None:
    """Code that needs only the shape of a client must not pay for aiohttp."""
    code = "import sys, pacore_graph.llm.protocols; print('aiohttp' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
