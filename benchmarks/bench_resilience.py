"""What flaky servers cost a run: failed problems under injected errors, and retry spread.

Two measurements against the scripted OpenAI-compatible server:

1. **Injected failures.** 20 problems, 30% of requests answered HTTP 500
   (a stable hash of body and attempt, so every run is the same), one attempt
   per request (``--retries 1``). Prints how many problems failed and in
   which round. A failed ``n``-sample request is asked again in smaller
   requests, so rounds with K > 1 do not fail; what is left are final-round
   (K = 1) calls whose single attempt failed.
2. **Retry spread.** 256 requests in flight, each answered 429 once, backoff
   4 s: over how long do the retries arrive? Measured with ``jitter=0`` (the
   lockstep baseline) and with the default jitter, in the same run; prints
   the ratio of the spreads.

    python benchmarks/bench_resilience.py
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

from pacore_graph.cli import main as pacore
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer


def injected_failures(rounds: str) -> str:
    tmp = Path(tempfile.mkdtemp())
    data = tmp / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"Q {i}?"}]}) + "\n"
            for i in range(20)
        )
    )
    out = tmp / "o.jsonl"
    with ScriptedServer(failure_rate=0.3).run_in_thread() as srv:
        argv = ["run", "--input", str(data), "--output", str(out), "--retries", "1"]
        argv += ["--rounds", rounds, "--base-url", srv.base_url, "--model", "scripted"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            pacore([*argv, "--no-progress"])
        requests = srv.request_count
    by_round: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        record = json.loads(line)
        if "error" in record:
            by_round[record["error"].split(":")[1].strip()] += 1
    total = sum(by_round.values())
    return (
        f"rounds {rounds:>5}: {total:2d}/20 problems failed {dict(by_round)}, {requests} requests"
    )


async def retry_spread(jitter: float) -> float:
    arrivals: list[float] = []

    def respond(req: ScriptedRequest) -> ScriptedReply:
        arrivals.append(time.monotonic())
        return ScriptedReply(content="ok")

    policy = ModelRetryPolicy(max_attempts=2, initial_backoff=4.0, jitter=jitter)
    async with ScriptedServer(respond, fail_first=1, failure_status=429) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=policy)
        try:
            await asyncio.gather(
                *(
                    client.complete([{"role": "user", "content": f"q{i}"}], params=SamplingParams())
                    for i in range(256)
                )
            )
        finally:
            await client.aclose()
    return max(arrivals) - min(arrivals)


def main() -> None:
    print("1. 30% injected HTTP 500s, --retries 1")
    for rounds in ("4", "8,2", "32,4"):
        print("  ", injected_failures(rounds))
    lockstep = asyncio.run(retry_spread(0.0))
    jittered = asyncio.run(retry_spread(ModelRetryPolicy().jitter))
    print("2. 256 requests, one 429 each, backoff 4 s: retries arrive over")
    print(f"   jitter 0 (lockstep): {lockstep * 1000:6.0f} ms")
    ratio = jittered / lockstep
    print(f"   default jitter:      {jittered * 1000:6.0f} ms  ({ratio:.1f}x the spread)")


if __name__ == "__main__":
    main()
