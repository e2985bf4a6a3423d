"""What the durable-run tests share: a dataset, its scripted answers, and a sample count.

``test_durable_runs`` (kill and resume) and ``test_store_failures`` (a store or
disk failing mid-run) both measure redone work as samples the server returned.
"""

from __future__ import annotations

import json
from pathlib import Path

from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

__all__ = ["by_input", "samples_returned", "write_dataset"]


def by_input(req: ScriptedRequest) -> ScriptedReply:
    """An answer chosen by the question and the sample's index, never by call order."""
    return ScriptedReply(
        content=f"answer {len(req.last_user) % 97} sample {req.sample_index}",
        completion_tokens=5,
    )


def samples_returned(srv: ScriptedServer) -> int:
    """Samples the server answered (an ``n``-request counts ``n``)."""
    return sum(int(r.body.get("n", 1)) for r in list(srv.requests) if r.status == 200)


def write_dataset(path: Path, problems: int) -> Path:
    """``problems`` records ``q0``, ``q1``, ... asking ``What is i + i?``."""
    with path.open("w") as fh:
        for i in range(problems):
            q = {"id": f"q{i}", "messages": [{"role": "user", "content": f"What is {i} + {i}?"}]}
            fh.write(json.dumps(q) + "\n")
    return path
