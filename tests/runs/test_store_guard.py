"""The store's outage policy on its own: what is retried, for how long, and the one line it ends in.

The operations are coroutines that fail by their attempt number (never by
the clock); with ``retry_s=0`` an outage ends at its first failure, so no
test waits for a policy's time to pass. The whole story against a real
PostgreSQL and SQLite is in ``test_store_failures.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable

import pytest

from pacore_graph.errors import PaCoReError
from pacore_graph.runs.store_guard import (
    DEFAULT_STORE_RETRY_S,
    StoreError,
    StoreGuard,
    redact_store,
)

URL = "postgresql://user:hunter2@db.example:5432/runs"


def failing(times: int, exc: BaseException) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """An operation that raises ``exc`` on its first ``times`` calls, then answers "ok"."""
    calls: list[int] = []

    async def operation() -> str:
        calls.append(len(calls))
        if len(calls) <= times:
            raise exc
        return "ok"

    return operation, calls


def test_redact_store_hides_passwords_only() -> None:
    assert redact_store("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact_store("postgresql://u@h/db?password=pw&sslmode=require") == (
        "postgresql://u@h/db?password=***&sslmode=require"
    )
    assert redact_store("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_store("/tmp/a.sqlite") == "/tmp/a.sqlite"


def test_the_store_is_named_without_its_password_and_the_default_wait_is_documented() -> None:
    guard = StoreGuard(URL)
    assert "hunter2" not in guard.store and guard.store == redact_store(URL)
    assert guard.retry_s == DEFAULT_STORE_RETRY_S
    assert issubclass(StoreError, PaCoReError)


async def test_a_transient_failure_is_retried_and_a_success_ends_the_outage() -> None:
    guard = StoreGuard(URL, retry_s=DEFAULT_STORE_RETRY_S, transient=(ConnectionError,))
    operation, calls = failing(1, ConnectionError("connection refused"))
    assert await guard.call(operation) == "ok"
    assert len(calls) == 2 and guard.retries == 1
    assert guard.outage_since is None and guard.last_cause == "connection refused"


async def test_an_outage_past_its_time_is_one_line_naming_the_store_and_the_cause() -> None:
    guard = StoreGuard(URL, retry_s=0, transient=(ConnectionError,))
    operation, calls = failing(99, ConnectionError("connection refused\nsecond line"))
    with pytest.raises(StoreError) as caught:
        await guard.call(operation)
    message = str(caught.value)
    assert len(calls) == 1 and guard.retries == 0
    assert "\n" not in message and "hunter2" not in message
    assert f"checkpoint store {guard.store} unreachable (connection refused)" in message
    assert "run the same command again to resume" in message


async def test_a_fatal_failure_is_not_retried() -> None:
    guard = StoreGuard("/tmp/runs.sqlite", transient=(ConnectionError,),
                       fatal=(sqlite3.DatabaseError,))  # fmt: skip
    operation, calls = failing(99, sqlite3.DatabaseError("file is not a database"))
    with pytest.raises(StoreError, match="failed \\(file is not a database\\)"):
        await guard.call(operation)
    assert len(calls) == 1 and guard.retries == 0


async def test_an_error_outside_the_policy_passes_through_untouched() -> None:
    guard = StoreGuard(URL, transient=(ConnectionError,))
    operation, _ = failing(1, KeyError("bug"))
    with pytest.raises(KeyError):
        await guard.call(operation)


async def test_the_probes_answer_is_the_cause_of_an_outage() -> None:
    async def probe() -> str | None:
        return "password authentication failed"

    guard = StoreGuard(URL, retry_s=0, transient=(ConnectionError,), probe=probe)
    operation, _ = failing(99, ConnectionError("pool timeout"))
    with pytest.raises(StoreError, match="unreachable \\(password authentication failed\\)"):
        await guard.call(operation)


async def test_a_probe_that_fails_leaves_the_last_cause() -> None:
    async def probe() -> str | None:
        raise OSError("probe broke")

    guard = StoreGuard(URL, retry_s=0, transient=(ConnectionError,), probe=probe)
    operation, _ = failing(99, ConnectionError("pool timeout"))
    with pytest.raises(StoreError, match="unreachable \\(pool timeout\\)"):
        await guard.call(operation)
