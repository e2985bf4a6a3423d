"""One chat client over several OpenAI-compatible replicas of the same model.

PaCoRe's fan-out (K=32 explorers per problem, many problems at once) rarely
fits one vLLM replica. :class:`MultiEndpointClient` is a
:class:`~pacore_graph.llm.client.ChatClient` that spreads samples over several
``base_url`` s serving the same model:

- **Least outstanding samples first**: a request with ``n=K`` counts K
  samples on its replica until it returns, and each request goes to the
  healthy replica with the fewest samples in flight (ties rotate). Counting
  samples, not requests, matters because one ``n=32`` request loads a server
  as much as 32 single ones.
- **Eject and re-admit**: a replica that refuses connections, times out or
  answers 5xx is taken out of rotation at once, and a background health check
  (``GET {base_url}/models``) re-admits it when it answers 200 again.
- **Streams too**: :meth:`MultiEndpointClient.stream` (the final round's
  tokens) picks a replica the same way and fails over while nothing has been
  streamed yet.
- **Fail over**: the failed request is retried on another replica straight
  away (no backoff while an untried healthy replica exists), so killing one of
  two replicas mid-run costs latency, not answers. Backoff applies only once
  every replica has been tried.

Each replica is an :class:`~pacore_graph.llm.client.OpenAICompatClient` with a
single attempt per call: retries are decided here, across replicas, so a dead
replica is not hammered by its own retry loop first.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import random
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from pacore_graph.errors import ModelCallError, UpstreamStatusError
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.client import DeltaCallback, OpenAICompatClient, resolve_api_key
from pacore_graph.llm.reply_limits import read_error_head
from pacore_graph.llm.retry import asked_wait
from pacore_graph.llm.sampling import PerSampleClient, SampleOutcome
from pacore_graph.llm.session_header import DEFAULT_SESSION_HEADER
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["MultiEndpointClient", "ReplicaStats", "chat_client_for"]


@dataclass(frozen=True, slots=True)
class ReplicaStats:
    """A snapshot of one replica's counters (for benchmarks, tests and logs)."""

    base_url: str
    healthy: bool
    outstanding: int
    requests: int
    samples: int
    failures: int
    ejections: int
    completion_tokens: int = 0


class _Replica:
    """Mutable bookkeeping for one upstream; only touched from the event loop."""

    __slots__ = (
        "client",
        "completion_tokens",
        "ejections",
        "failures",
        "healthy",
        "outstanding",
        "probe",
        "requests",
        "samples",
    )

    def __init__(self, client: OpenAICompatClient) -> None:
        self.client = client
        self.healthy = True
        self.outstanding = 0
        self.requests = 0
        self.samples = 0
        self.failures = 0
        self.ejections = 0
        self.completion_tokens = 0
        self.probe: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def busy(self, samples: int) -> Iterator[None]:
        """Count one request of ``samples`` samples as in flight here while it runs."""
        self.outstanding += samples
        self.requests += 1
        try:
            yield
        finally:
            self.outstanding -= samples

    def stats(self) -> ReplicaStats:
        return ReplicaStats(
            base_url=self.client.base_url,
            healthy=self.healthy,
            outstanding=self.outstanding,
            requests=self.requests,
            samples=self.samples,
            failures=self.failures,
            ejections=self.ejections,
            completion_tokens=self.completion_tokens,
        )


class _Rotation:
    """One request's way round the replicas (see :meth:`MultiEndpointClient._next_replica`)."""

    __slots__ = ("retry_after", "tried")

    def __init__(self) -> None:
        self.tried: set[int] = set()
        self.retry_after: float | None = None


def _ejects(exc: ModelCallError) -> bool:
    """Connection refused/reset, timeouts and 5xx take a replica out.

    4xx do not, nor does one sample's answer (no content, a malformed or
    oversized reply) or a prompt that could not be sent: the replica is up.
    An error event mid-stream, and a client's own ``ModelCallError``, do.
    """
    if isinstance(exc, UpstreamStatusError):
        return exc.status >= 500
    return exc.kind in ("transport", "timeout", "stream_error", "other")


class MultiEndpointClient(PerSampleClient):
    """A :class:`~pacore_graph.llm.client.ChatClient` over several replicas of one model.

    ``retry`` bounds the attempts of one request across replicas (the default
    allows four); ``health_interval`` is the pause between health checks of an
    ejected replica.
    """

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        *,
        api_key: str | None = None,
        retry: ModelRetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        health_interval: float = 1.0,
        health_timeout: float = 2.0,
        session_header: str | None = DEFAULT_SESSION_HEADER,
    ) -> None:
        urls = [u.rstrip("/") for u in base_urls]
        if not urls:
            raise ValueError("MultiEndpointClient needs at least one base URL")
        if len(set(urls)) != len(urls):
            raise ValueError(f"duplicate base URLs: {urls}")
        if health_interval <= 0 or health_timeout <= 0:
            raise ValueError("health_interval and health_timeout must be > 0")
        self.model = model
        self.retry = retry or ModelRetryPolicy()
        single = ModelRetryPolicy(max_attempts=1)
        self._replicas = [
            _Replica(
                OpenAICompatClient(
                    u,
                    model,
                    api_key=api_key,
                    retry=single,
                    headers=headers,
                    session_header=session_header,
                )
            )
            for u in urls
        ]
        self._health_headers = {"Authorization": f"Bearer {resolve_api_key(api_key)}"}
        self.health_interval = health_interval
        self.health_timeout = health_timeout
        self._turn = itertools.count()
        self._rng = random.Random()
        self._probes: weakref.WeakSet[asyncio.Task[None]] = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"MultiEndpointClient(base_urls={self.base_urls!r}, model={self.model!r})"

    @property
    def base_urls(self) -> list[str]:
        return [r.client.base_url for r in self._replicas]

    def stats(self) -> list[ReplicaStats]:
        """Per-replica counters, in the order the URLs were given."""
        return [r.stats() for r in self._replicas]

    # ------------------------------------------------------------------ choosing

    def _pick(self, tried: set[int]) -> int:
        """The healthy, untried replica with the fewest samples in flight.

        Falls back to untried ejected replicas, then to any replica, so a
        request is never refused just because every replica looked down a
        moment ago.
        """
        turn = next(self._turn)
        count = len(self._replicas)
        for replica in self._replicas:
            if not replica.healthy:
                self._ensure_probe(replica)
        order = [(turn + i) % count for i in range(count)]  # rotate ties
        for pool in (
            [i for i in order if self._replicas[i].healthy and i not in tried],
            [i for i in order if i not in tried],
            [i for i in order if self._replicas[i].healthy],
            order,
        ):
            if pool:
                return min(pool, key=lambda i: self._replicas[i].outstanding)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ health

    def _eject(self, replica: _Replica) -> None:
        if replica.healthy:
            replica.healthy = False
            replica.ejections += 1
        self._ensure_probe(replica)

    def _ensure_probe(self, replica: _Replica) -> None:
        """A health check runs for an ejected replica in the current event loop.

        A probe belongs to the loop that started it; when the client is used
        from a later loop (``asyncio.run`` per call), a new probe starts there.
        """
        loop = asyncio.get_running_loop()
        probe = replica.probe
        if probe is None or probe.done() or probe.get_loop() is not loop:
            task = loop.create_task(self._probe(replica))
            replica.probe = task
            self._probes.add(task)

    async def _probe(self, replica: _Replica) -> None:
        """Poll ``GET {base_url}/models`` until it answers 200, then re-admit."""
        url = f"{replica.client.base_url}/models"
        timeout = aiohttp.ClientTimeout(total=self.health_timeout)
        async with aiohttp.ClientSession(headers=self._health_headers) as session:
            while not replica.healthy:
                await asyncio.sleep(self.health_interval)
                try:
                    async with session.get(url, timeout=timeout) as resp:
                        await read_error_head(resp)  # a bounded read: only the status counts
                        if resp.status == 200:
                            replica.healthy = True
                except (aiohttp.ClientError, TimeoutError):
                    continue

    async def check_health(self) -> list[bool]:
        """Probe every replica once now; update and return their health."""
        timeout = aiohttp.ClientTimeout(total=self.health_timeout)

        async def one(session: aiohttp.ClientSession, replica: _Replica) -> bool:
            try:
                async with session.get(
                    f"{replica.client.base_url}/models", timeout=timeout
                ) as resp:
                    await read_error_head(resp)
                    ok = resp.status == 200
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            if ok:
                replica.healthy = True
            else:
                self._eject(replica)
            return ok

        async with aiohttp.ClientSession(headers=self._health_headers) as session:
            return list(await asyncio.gather(*(one(session, r) for r in self._replicas)))

    # ------------------------------------------------------------------ calls

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]:
        """One outcome per sample, like :meth:`OpenAICompatClient.complete_each`.

        A request whose samples all failed with a retryable error goes to
        another replica; samples that failed alone (a choice without content)
        stay failed, as on one server.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        policy = self.retry
        rotation = _Rotation()
        deadline = CallDeadline.start(policy.call_seconds(params.timeout))
        outcomes: list[SampleOutcome] = [deadline.expire()] * n
        for attempt in range(1, policy.max_attempts + 1):
            index = await self._next_replica(attempt, rotation, deadline)
            if index is None:  # the call's deadline passed: the last answer stands
                return _final(outcomes, deadline)
            replica = self._replicas[index]
            with replica.busy(n):
                outcomes = await replica.client.complete_each(
                    messages, n=n, params=params, seed=seed, deadline=deadline
                )
            outcomes = _map_errors(outcomes, functools.partial(_named, upstream=index))
            failures = [o for o in outcomes if isinstance(o, ModelCallError)]
            replica.samples += len(outcomes) - len(failures)
            replica.completion_tokens += sum(
                o.completion_tokens for o in outcomes if isinstance(o, Completion)
            )
            if not failures:
                return outcomes
            self._failed(replica, failures)
            whole = len(failures) == len(outcomes)
            if whole and failures[0].retryable and attempt < policy.max_attempts:
                rotation.retry_after = asked_wait(failures[0])
                continue
            if whole and failures[0].retryable:
                # The replica's own "gave up after 1 attempts" says less than this.
                gave_up = f"gave up after {attempt} attempts over {len(self._replicas)} replicas"
                return _map_errors(
                    outcomes, functools.partial(_gave_up, attempts=attempt, note=gave_up)
                )
            return outcomes
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        params: SamplingParams,
        seed: int | None = None,
        on_delta: DeltaCallback,
    ) -> Completion:
        """One sample over server-sent events, on the least loaded replica.

        Fails over like :meth:`complete` while nothing has been streamed; once a
        delta went out, a failure is final (the caller already showed it).
        """
        policy = self.retry
        rotation = _Rotation()
        deadline = CallDeadline.start(policy.call_seconds(params.timeout))
        last: ModelCallError | None = None
        for attempt in range(1, policy.max_attempts + 1):
            index = await self._next_replica(attempt, rotation, deadline)
            if index is None:
                raise deadline.expire(last)
            replica = self._replicas[index]
            sent = False

            async def forward(kind: str, text: str) -> None:
                nonlocal sent
                sent = True
                await on_delta(kind, text)

            try:
                with replica.busy(1):
                    out = await replica.client.stream(
                        messages, params=params, seed=seed, on_delta=forward, deadline=deadline
                    )
            except ModelCallError as caught:
                exc = caught.replace(upstream=index).with_attempts(attempt)
                self._failed(replica, [exc])
                if sent or not exc.retryable or attempt == policy.max_attempts:
                    raise exc from caught.__cause__
                rotation.retry_after = asked_wait(exc)
                last = exc
                continue
            replica.samples += 1
            replica.completion_tokens += out.completion_tokens
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    async def _next_replica(
        self, attempt: int, rotation: _Rotation, deadline: CallDeadline
    ) -> int | None:
        """The replica for ``attempt``: each at most once per round, least loaded first.

        Once every replica has failed this request, wait (jittered, or as the
        last replica asked) and go round again; None when the call's deadline
        has passed or would pass during that wait.
        """
        if len(rotation.tried) == len(self._replicas):
            delay = self._round_delay(attempt, rotation.retry_after)
            if not deadline.allows(delay):
                return None
            await asyncio.sleep(delay)
            rotation.tried.clear()
        if not deadline.allows():
            return None
        index = self._pick(rotation.tried)
        rotation.tried.add(index)
        return index

    def _failed(self, replica: _Replica, errors: Sequence[ModelCallError]) -> None:
        """Count a failed request; eject the replica when an error says it is down."""
        replica.failures += 1
        if any(_ejects(e) for e in errors):
            self._eject(replica)

    def _round_delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait once every replica has failed a request: the client's own rule.

        Jittered like :meth:`OpenAICompatClient` retries (a burst of failures
        does not come back in lockstep), or the last replica's ``Retry-After``.
        """
        return self.retry.delay(
            attempt - len(self._replicas), retry_after=retry_after, rng=self._rng
        )

    async def aclose(self) -> None:
        """Stop health checks and close this loop's sessions."""
        for task in list(self._probes):
            task.cancel()
        for replica in self._replicas:
            replica.probe = None
            await replica.client.aclose()

    async def wait_healthy(self, timeout: float = 10.0) -> None:
        """Wait until every replica is in rotation (tests, start-up scripts)."""
        deadline = time.monotonic() + timeout
        while not all(r.healthy for r in self._replicas):
            if time.monotonic() > deadline:
                down = [r.client.base_url for r in self._replicas if not r.healthy]
                raise TimeoutError(f"replicas still out of rotation: {down}")
            await asyncio.sleep(0.05)


def _final(outcomes: list[SampleOutcome], deadline: CallDeadline) -> list[SampleOutcome]:
    """The last attempt's outcomes, its errors marked as ended by the call deadline."""
    return _map_errors(outcomes, deadline.expire)


def _named(exc: ModelCallError, *, upstream: int) -> ModelCallError:
    return exc.replace(upstream=upstream)


def _gave_up(exc: ModelCallError, *, attempts: int, note: str) -> ModelCallError:
    return exc.with_attempts(attempts, gave_up=note)


def _map_errors(
    outcomes: list[SampleOutcome], change: Callable[[ModelCallError], ModelCallError]
) -> list[SampleOutcome]:
    """``outcomes`` with each error replaced by ``change(error)``; a shared error stays shared."""
    copies: dict[int, ModelCallError] = {}
    out: list[SampleOutcome] = []
    for outcome in outcomes:
        if isinstance(outcome, ModelCallError):
            if id(outcome) not in copies:
                copies[id(outcome)] = change(outcome)
            out.append(copies[id(outcome)])
        else:
            out.append(outcome)
    return out


def chat_client_for(
    base_urls: Sequence[str],
    model: str,
    *,
    api_key: str | None = None,
    retry: ModelRetryPolicy | None = None,
    session_header: str | None = DEFAULT_SESSION_HEADER,
) -> OpenAICompatClient | MultiEndpointClient:
    """The direct client for one URL, the multi-endpoint client for several.

    ``session_header``: the header each request of a run carries its run id in
    (:mod:`pacore_graph.llm.session_header`), None for none.
    """
    if len(base_urls) == 1:
        return OpenAICompatClient(
            base_urls[0], model, api_key=api_key, retry=retry, session_header=session_header
        )
    return MultiEndpointClient(
        base_urls, model, api_key=api_key, retry=retry, session_header=session_header
    )
