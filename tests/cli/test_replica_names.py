"""A replica named twice is a one-line usage error, not a traceback.

``MultiEndpointClient`` refuses duplicate URLs with a ``ValueError``; before
this check the command line let it escape as a traceback (``pacore run``) and
``pacore serve`` did the same at start. Nothing is sent in either case.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pacore_graph.cli import main
from pacore_graph.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(lambda request: "never asked").run_in_thread() as srv:
        yield srv


def test_run_with_a_base_url_twice_exits_2_in_one_line(
    server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = server.base_url
    argv = ["run", "Q", "--base-url", url, "--base-url", url, "--model", "m", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error: --base-url ")
    assert "given twice" in err and err.count("\n") == 1
    assert server.request_count == 0


def test_serve_with_an_upstream_twice_exits_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "http://127.0.0.1:1/v1"
    assert main(["serve", "--model", "m", "--upstream", url, "--upstream", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error: ")
    assert "given twice" in err and err.count("\n") == 1
