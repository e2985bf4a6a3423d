"""A throwaway PostgreSQL server for tests: initdb + pg_ctl in a temporary directory.

PostgreSQL refuses to run as root, so when the tests run as root the server
runs as the unprivileged ``postgres`` (or ``nobody``) user via ``runuser``.
It listens on a free loopback port with ``trust`` authentication, and is
stopped (``pg_ctl stop -m immediate``) and deleted when the block ends.

``PACORE_REQUIRE_POSTGRES=1`` (set by CI) turns "PostgreSQL is not
installed" from a skip into a failure, so CI cannot pass without it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN_DIRS = (
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/17/bin",
)


def pg_bin() -> Path | None:
    for d in PG_BIN_DIRS:
        if (Path(d) / "initdb").exists():
            return Path(d)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def require_postgres() -> Path:
    """The PostgreSQL bin directory; skip (or fail under PACORE_REQUIRE_POSTGRES=1) if absent."""
    path = pg_bin()
    if path is None:
        message = (
            "PostgreSQL (initdb, pg_ctl) is not installed (Debian: apt-get install postgresql)"
        )
        if os.environ.get("PACORE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PACORE_REQUIRE_POSTGRES=1 but {message}")
        pytest.skip(message)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> list[str]:
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"]
    pytest.fail("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL")


@dataclass
class PostgresServer:
    """A running test cluster that a test may stop and start again (same port, same data)."""

    url: str
    port: int
    argv_start: list[str]
    argv_stop: list[str]
    env: dict[str, str]
    cwd: Path

    def stop(self) -> None:
        """``pg_ctl stop -m immediate``: the server is gone, its clients' connections cut."""
        subprocess.run(self.argv_stop, capture_output=True, env=self.env, cwd=self.cwd, check=True)

    def start(self) -> None:
        subprocess.run(self.argv_start, capture_output=True, env=self.env, cwd=self.cwd, check=True)
        _wait_for_port(self.port)


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)


@contextmanager
def running_postgres() -> Iterator[str]:
    """Start a fresh cluster; yields its ``postgresql://`` URL."""
    with postgres_server() as server:
        yield server.url


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """Start a fresh cluster; yields a :class:`PostgresServer` (stopped and deleted at the end)."""
    bindir = require_postgres()
    prefix = _run_as()
    tmp = Path(tempfile.mkdtemp(prefix="pacore-pg-"))
    data = tmp / "data"
    port = _free_port()
    if prefix:
        user = prefix[2]
        entry = pwd.getpwnam(user)
        os.chown(tmp, entry.pw_uid, entry.pw_gid)
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    try:
        subprocess.run(
            [*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "pacore", "-A", "trust"],
            check=True,
            capture_output=True,
            env=env,
            cwd=tmp,
        )
        options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={tmp}"
        pg_ctl = [*prefix, str(bindir / "pg_ctl"), "-D", str(data)]
        server = PostgresServer(
            url=f"postgresql://pacore@127.0.0.1:{port}/postgres",
            port=port,
            argv_start=[*pg_ctl, "-l", str(tmp / "log"), "-o", options, "-w", "-t", "60", "start"],
            argv_stop=[*pg_ctl, "-m", "immediate", "-w", "stop"],
            env=env,
            cwd=tmp,
        )
        server.start()
        yield server
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            env=env,
            cwd=tmp,
            check=False,
        )
        shutil.rmtree(tmp, ignore_errors=True)
