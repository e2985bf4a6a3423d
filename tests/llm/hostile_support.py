"""The direct client opened against a hostile upstream, and the attacks' prompts.

Each attack is chosen by a marker in the prompt
(:mod:`pacore_graph.testing.hostile_upstream`), so a reply depends on the
request only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pacore_graph.errors import ModelCallError
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing.hostile_upstream import HostileServer, marker

FAST = ModelRetryPolicy(max_attempts=4, initial_backoff=0.001, max_backoff=0.01)


SMALL = SamplingParams(max_tokens=16, timeout=30)


#: Comfortably over the cap for ``SMALL`` (about 1 MiB), and more than loopback
#: socket buffers hold, so "written to the end" means the client read it all.
HUGE = 48 << 20


def ask(attack: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"What is 2+2? {marker(attack)}"}]


@contextlib.asynccontextmanager
async def hostile(
    retry: ModelRetryPolicy = FAST, **kwargs: Any
) -> AsyncIterator[tuple[HostileServer, OpenAICompatClient]]:
    async with HostileServer(**kwargs) as server:
        client = OpenAICompatClient(server.base_url, "m", retry=retry)
        try:
            yield server, client
        finally:
            await client.aclose()


def errors(outcomes: list[SampleOutcome]) -> list[ModelCallError]:
    assert all(isinstance(o, ModelCallError) for o in outcomes), outcomes
    return [o for o in outcomes if isinstance(o, ModelCallError)]
