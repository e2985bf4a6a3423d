"""``pacore serve`` in front of the real embedded model: real tokens, streamed; its default."""

from __future__ import annotations

import signal

import httpx
import openai
import pytest
from embedded_support import require_embedded
from serve_support import running_serve, serve_process

from pacore_graph.serve import SERVED_MODELS, ServeSettings
from pacore_graph.settings.config import SamplingParams

pytestmark = pytest.mark.embedded


async def test_serve_streams_real_tokens_from_the_embedded_model() -> None:
    require_embedded()
    from pacore_graph.embedded import model_endpoint

    async with model_endpoint(None, None) as (base_url, model):
        settings = ServeSettings(
            upstreams=(base_url,),
            model=model,
            sampling=SamplingParams(max_tokens=32),
            max_samples_in_flight=4,
        )
        with running_serve(settings) as srv:
            client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            stream = await client.chat.completions.create(
                model="pacore:2",
                messages=[{"role": "user", "content": "What is 2 + 3?"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [c async for c in stream]
            await client.close()
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    progress = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert content.strip(), "the model returned no text"
    assert "Round 1/2: 2 parallel explorers." in progress
    # The answer arrived as several deltas: tokens streamed from the embedded engine.
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1
    usage = chunks[-1].usage
    assert usage is not None
    rounds = (usage.model_extra or {})["rounds"]
    assert [r["width"] for r in rounds] == [2, 1]
    assert all(0 < r["completion_tokens"] <= 32 * r["width"] for r in rounds)
    assert usage.completion_tokens == sum(r["completion_tokens"] for r in rounds)


def test_pacore_serve_without_upstream_starts_the_embedded_model() -> None:
    """``pacore serve`` with no ``--upstream``: the embedded model behind it, PaCoRe and plain."""
    require_embedded()
    # the model loads first on a loaded machine
    with serve_process("--max-tokens", "16", "--log-level", "warning", start_s=240) as server:
        base = server.base
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        ids = [m.id for m in client.models.list()]
        plain = [name for name in ids if name not in SERVED_MODELS]
        reply = client.chat.completions.create(
            model="pacore:2", messages=[{"role": "user", "content": "What is 2 + 3?"}]
        )
        relayed = client.chat.completions.create(
            model=plain[0], messages=[{"role": "user", "content": "Hi"}], max_tokens=8
        )
        code = server.stop()
        stderr = server.stderr()
    assert ids[: len(SERVED_MODELS)] == list(SERVED_MODELS) and plain
    assert reply.usage is not None
    assert [r["width"] for r in (reply.usage.model_extra or {})["rounds"]] == [2, 1]
    assert relayed.model == plain[0] and relayed.choices[0].message.content
    assert "starting the embedded model server" in stderr
    assert code in (0, -signal.SIGTERM)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base}/health", timeout=1)
