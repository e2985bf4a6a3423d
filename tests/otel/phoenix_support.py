"""A real Arize Phoenix (``phoenix serve``) on loopback, and its REST and GraphQL reads.

Phoenix is an optional extra (``pip install -e .[phoenix]``); without it the
tests that need it skip, and ``PACORE_REQUIRE_PHOENIX=1`` (set by CI) makes
that a failure. It takes 10-15 s to start here, so one server serves a whole
session; each test files its runs under a project of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serve_support import free_port

__all__ = ["Phoenix", "phoenix_binary", "running_phoenix"]


def phoenix_binary() -> str:
    """``phoenix`` beside this interpreter; skip (or fail under PACORE_REQUIRE_PHOENIX=1)."""
    found = Path(sys.executable).with_name("phoenix")
    if found.exists():
        return str(found)
    on_path = shutil.which("phoenix")
    if on_path:
        return on_path
    message = "Arize Phoenix is not installed (pip install -e '.[phoenix]')"
    if os.environ.get("PACORE_REQUIRE_PHOENIX") == "1":
        pytest.fail(f"PACORE_REQUIRE_PHOENIX=1 but {message}")
    pytest.skip(message)


@dataclass(frozen=True)
class Phoenix:
    url: str
    """The UI, the REST API (``/v1``) and OTLP/HTTP (``/v1/traces``) share this address."""
    log: Path

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return json.load(resp)

    def graphql(self, query: str, **variables: Any) -> Any:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(
            self.url + "/graphql", data=body, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            out = json.load(resp)
        if out.get("errors"):
            raise AssertionError(f"GraphQL errors: {out['errors']}")
        return out["data"]

    def project_id(self, name: str) -> str | None:
        projects = self.get("/v1/projects?limit=100")["data"]
        return next((p["id"] for p in projects if p["name"] == name), None)

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of a project (REST ``/v1/projects/{project}/spans``, all pages)."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        quoted = urllib.parse.quote(project, safe="")
        while True:
            query = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            try:
                page = self.get(f"/v1/projects/{quoted}/spans{query}")
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # the project does not exist yet
                    return []
                raise
            out.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def wait_for_spans(
        self, project: str, count: int, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """The project's spans once ``count`` have been ingested (ingestion is asynchronous)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(project)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.3)


@contextmanager
def running_phoenix(workdir: Path) -> Iterator[Phoenix]:
    """``phoenix serve`` on free loopback ports with its database in ``workdir``.

    Stopped by its own pid at the end (SIGTERM, then SIGKILL).
    """
    binary = phoenix_binary()
    port, grpc_port = free_port(), free_port()
    log = workdir / "phoenix.log"
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [binary, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=workdir
        )
    phoenix = Phoenix(f"http://127.0.0.1:{port}", log)
    try:
        # Phoenix's start (imports, then its database migrations) took 60 s in
        # a serial run and over 120 s under `pytest -n 2` on a loaded machine;
        # the wait is set-up, not what the tests check, so it is generous.
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"phoenix serve exited: {log.read_text()[-2000:]}")
            try:
                phoenix.get("/v1/projects")
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    message = f"phoenix serve did not answer: {log.read_text()[-2000:]}"
                    raise RuntimeError(message) from None
                time.sleep(0.25)
        yield phoenix
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
