"""``pacore serve`` takes the call options of the other commands, and passes them on.

``--call-deadline`` bounds one upstream call across its attempts, backoffs and
``n``-splits for ``pacore run``; the server's upstream calls need the same bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from pacore_graph.cli import main


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The settings ``serve`` would have been started with (no socket is bound)."""
    import pacore_graph.serve as serve_package

    calls: list[Any] = []
    monkeypatch.setattr(serve_package, "serve", lambda settings, **kw: calls.append(settings))
    monkeypatch.delenv("PACORE_SERVE_API_KEY", raising=False)
    monkeypatch.delenv("PACORE_CALL_DEADLINE", raising=False)
    monkeypatch.delenv("PACORE_RETRIES", raising=False)
    return calls


def test_call_deadline_and_retries_reach_the_servers_retry_policy(started: list[Any]) -> None:
    argv = ["serve", "--upstream", "http://127.0.0.1:1/v1", "--model", "m"]
    assert main([*argv, "--call-deadline", "7.5", "--retries", "3"]) == 0
    (settings,) = started
    assert settings.retry.deadline == 7.5
    assert settings.retry.max_attempts == 3


def test_without_the_flags_the_policy_keeps_its_defaults(started: list[Any]) -> None:
    from pacore_graph.settings.config import ModelRetryPolicy

    assert main(["serve", "--upstream", "http://127.0.0.1:1/v1", "--model", "m"]) == 0
    (settings,) = started
    assert settings.retry == ModelRetryPolicy()
