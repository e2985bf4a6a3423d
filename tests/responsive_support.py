"""Whether a server stays responsive while hostile requests are handled (issue 31).

"Responsive" is measured, not assumed: the hostile requests run in threads
while this thread asks ``/health`` over and over on a connection of its own;
the slowest answer is the figure a test bounds. A server whose event loop is
busy for seconds shows it here as a seconds-long ``/health``.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Outcome", "RSSPeak", "Watch", "post_json", "rss_mb", "watch_health"]


@dataclass(frozen=True)
class Outcome:
    """One request's answer: status (0: no answer, ``error`` says why), body, seconds taken."""

    status: int
    body: bytes
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class Watch:
    """The hostile requests' outcomes and what ``/health`` did meanwhile."""

    outcomes: list[Outcome]
    worst_health_s: float
    health_polls: int


def post_json(url: str, data: bytes, timeout: float = 120.0) -> Outcome:
    """POST ``data`` as JSON; the answer whatever its status."""
    started = time.monotonic()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Outcome(response.status, response.read(), time.monotonic() - started)
    except urllib.error.HTTPError as exc:
        return Outcome(exc.code, exc.read(), time.monotonic() - started)
    except OSError as exc:
        return Outcome(0, b"", time.monotonic() - started, repr(exc))


def watch_health(
    health_url: str, jobs: Sequence[Callable[[], Outcome]], *, timeout: float = 120.0
) -> Watch:
    """Run ``jobs`` at once in threads; poll ``health_url`` until all are done."""
    outcomes: list[Any] = [None] * len(jobs)

    def run(index: int) -> None:
        outcomes[index] = jobs[index]()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    worst = 0.0
    polls = 0
    deadline = time.monotonic() + timeout
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        started = time.monotonic()
        try:
            with urllib.request.urlopen(health_url, timeout=timeout) as response:
                response.read()
        except OSError:
            pass  # counted by its time: a health check that fails is as slow as it took
        worst = max(worst, time.monotonic() - started)
        polls += 1
        time.sleep(0.01)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return Watch(outcomes, worst, polls)


def rss_mb(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of process ``pid`` in MB, from ``/proc`` (Linux)."""
    fields: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


class RSSPeak:
    """The most resident memory process ``pid`` reached while the block ran, sampled (MB).

    Unlike ``VmHWM`` it starts from the block's own beginning, so a peak
    reached earlier in a process that ran other tests does not hide growth.
    """

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.before = 0.0
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @property
    def growth(self) -> float:
        return self.peak - self.before

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid)[0])
            self._stop.wait(self.interval)

    def __enter__(self) -> RSSPeak:
        self.before = self.peak = rss_mb(self.pid)[0]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb(self.pid)[0])
