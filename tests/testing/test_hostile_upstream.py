"""The hostile upstream itself: attacks chosen by input, counted, and refused when unknown.

What the clients do with each attack is tested where the limit lives
(``tests/llm/test_reply_limits.py``, ``test_reply_checks.py``,
``test_call_deadline.py``); here the server is checked with a bare aiohttp
client, so a test of the clients can trust which attack it was sent.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from pacore_graph.testing.hostile_upstream import (
    ATTACKS,
    MALFORMED_ATTACKS,
    MALFORMED_EVENT_ATTACKS,
    HostileServer,
    marker,
)


def body(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": prompt}], **extra}


async def post(server: HostileServer, payload: dict[str, Any]) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.base_url}/chat/completions", json=payload) as resp,
    ):
        return resp.status, await resp.read()


def test_the_attack_lists_are_part_of_the_whole() -> None:
    assert MALFORMED_ATTACKS <= ATTACKS and MALFORMED_EVENT_ATTACKS <= ATTACKS
    assert not MALFORMED_ATTACKS & MALFORMED_EVENT_ATTACKS


def test_an_unknown_attack_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown attack 'nope'") as caught:
        marker("nope")
    assert all(name in str(caught.value) for name in ATTACKS)
    with pytest.raises(ValueError, match="unknown attack"):
        HostileServer(attack="nope")
    with pytest.raises(ValueError, match="size must be"):
        HostileServer(size=0)


async def test_an_unmarked_request_gets_the_ordinary_reply() -> None:
    async with HostileServer() as server:
        status, raw = await post(server, body("What is 2+2?"))
    assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"]
    assert server.attacks_sent == {}


@pytest.mark.parametrize("attack", sorted(MALFORMED_ATTACKS))
async def test_a_marked_request_gets_its_malformed_answer_and_is_counted(attack: str) -> None:
    async with HostileServer() as server:
        status, raw = await post(server, body(f"q {marker(attack)}", n=2))
    assert server.attacks_sent == {attack: 1}
    assert status == 200 and raw  # a 200 with a body of the wrong shape


async def test_odd_seeds_only_spares_the_even_ones() -> None:
    mark = marker("json_array", odd_seeds_only=True)
    async with HostileServer() as server:
        answers = {seed: await post(server, body(f"q {mark}", seed=seed)) for seed in range(4)}
    assert server.attacks_sent == {"json_array": 2}  # seeds 1 and 3
    for seed, (status, raw) in answers.items():
        attacked = json.loads(raw) == [1, 2, 3]
        assert status == 200 and attacked == (seed % 2 == 1)


async def test_the_attack_option_attacks_every_request() -> None:
    async with HostileServer(attack="error_object") as server:
        for q in range(3):
            await post(server, body(f"q{q}"))
    assert server.attacks_sent == {"error_object": 3}


async def test_a_huge_body_is_written_to_the_end_when_the_client_reads_on() -> None:
    size = 3 << 20
    async with HostileServer(size=size) as server:
        status, raw = await post(server, body(f"q {marker('huge_body')}"))
    assert status == 200 and len(raw) >= size
    assert server.completed == {"huge_body": 1}


async def test_a_truncated_body_declares_more_than_it_sends() -> None:
    async with HostileServer(size=100_000) as server:  # noqa: SIM117
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{server.base_url}/chat/completions", json=body(marker("truncated_body"))
            ) as resp,
        ):
            declared = resp.content_length
            with pytest.raises(aiohttp.ClientPayloadError):
                await resp.read()
    assert declared is not None and declared > 100_000
    assert server.attacks_sent == {"truncated_body": 1}


async def test_model_names_lists_that_many_distinct_names_its_own_first() -> None:
    async with HostileServer(model_names=25_003, model="own") as server:  # noqa: SIM117
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.base_url}/models") as resp:
                listed = json.loads(await resp.read())
            async with session.get(f"{server.base_url}/models") as resp:
                partial = await resp.content.read(1000)  # then hang up mid-list
    ids = [entry["id"] for entry in listed["data"]]
    assert len(ids) == len(set(ids)) == 25_003
    assert ids[0] == "own" and ids[1] == "model-000000000" and ids[-1] == "model-000025001"
    assert partial.startswith(b'{"object":"list","data":[{"id":"own"}')
    assert server.models_requests == 2
    assert server.models_completed >= 1
