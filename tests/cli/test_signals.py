"""cli/signals: SIGTERM cancels the command running under ``Termination.run``, as Ctrl-C does.

The signal is real: this process sends SIGTERM to itself from inside the run
(scheduled on the loop, so it lands while the command waits), and the
handler the block installed is checked to be gone afterwards.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from pacore_graph.cli.signals import Terminated, Termination


async def _wait_for_sigterm(termination: Termination, cleaned: list[str]) -> None:
    async def command() -> None:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("finally ran")

    await termination.run(command())


def test_sigterm_cancels_the_run_which_cleans_up_and_ends_as_terminated() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned: list[str] = []
    with Termination() as termination, pytest.raises(Terminated):
        asyncio.run(_wait_for_sigterm(termination, cleaned))
    assert termination.received
    assert cleaned == ["finally ran"]
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_command_that_finishes_returns_its_value() -> None:
    async def main(termination: Termination) -> int:
        async def command() -> int:
            return 7

        return await termination.run(command())

    with Termination() as termination:
        assert asyncio.run(main(termination)) == 7
    assert not termination.received


def test_a_cancellation_without_sigterm_stays_a_cancellation() -> None:
    async def main(termination: Termination) -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_soon(task.cancel)
        await termination.run(asyncio.Event().wait())

    with Termination() as termination, pytest.raises(asyncio.CancelledError):
        asyncio.run(main(termination))
    assert not termination.received


def test_sigterm_outside_a_run_stops_where_it_lands() -> None:
    with Termination() as termination, pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
    assert termination.received


def test_off_the_main_thread_no_handler_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def worker() -> None:
        with Termination():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [before]
