"""runs/ray_cluster: dataset shares by a stable hash of the id, and their merge.

The commands over a real local cluster (a worker killed mid-run) are
cli/ray_run's: tests/cli/test_ray_run.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from pacore_graph.runs.ray_cluster import merge_shares, plan_shares, shard_of
from pacore_graph.runs.runner import read_dataset
from tests.durable_support import write_dataset


def test_shares_are_stable_and_cover_every_problem(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 30)
    records, errors = read_dataset(data)
    assert not errors
    out = tmp_path / "out.jsonl"
    shares = plan_shares(records, out, 3)
    assert [s.index for s in shares] == [0, 1, 2]
    seen: list[str] = []
    for share in shares:
        ids = [json.loads(line)["id"] for line in share.input.read_text().splitlines()]
        assert all(shard_of(i, 3) == share.index for i in ids)
        assert share.output.name == f"out.jsonl.ray-{share.index}-of-3.jsonl"
        seen += ids
    assert sorted(seen) == sorted(r.id for r in records)
    again, _ = read_dataset(shares[0].input)  # a share reads back as the same problems
    assert [r.messages for r in again] == [r.messages for r in records if shard_of(r.id, 3) == 0]
    assert shard_of("q7", 3) == shard_of("q7", 3)  # by id, not by order or process


def test_merge_appends_compacts_and_removes_the_share_files(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 6)
    records, _ = read_dataset(data)
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"request_id": "q0", "id": "q0", "answer": "old"}) + "\n")
    shares = plan_shares(records[1:], out, 2)
    for share in shares:
        lines = [
            json.dumps(
                {"request_id": json.loads(x)["id"], "id": json.loads(x)["id"], "answer": "a"}
            )
            for x in share.input.read_text().splitlines()
        ]
        share.output.write_text("\n".join(lines) + "\n" + '{"request_id": "cut')  # a cut line
        share.checkpoint.write_bytes(b"")
    merge_shares(out, shares)
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == [f"q{i}" for i in range(6)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl", "out.jsonl"]
