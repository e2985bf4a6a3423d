"""runs/loop_lag: the lag probe `pacore run` starts when PACORE_LOOP_LAG_FILE is set."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from cli_support import run_argv

from pacore_graph.cli import main
from pacore_graph.runs.loop_lag import ENV_VAR, LagProbe, loop_lag_probe
from pacore_graph.testing import ScriptedServer


async def test_a_stalled_loop_shows_as_lag_in_the_written_summary(tmp_path: Path) -> None:
    target = tmp_path / "lag.json"
    async with loop_lag_probe({ENV_VAR: str(target)}) as probe:
        assert isinstance(probe, LagProbe)
        await asyncio.sleep(0.05)  # the probe wakes a few times on an idle loop
        time.sleep(0.25)  # a synchronous stall: the probe's next wake-up is >= 0.24 s late
        await asyncio.sleep(0.03)
    report = json.loads(target.read_text())
    assert report["samples"] >= 2 and report["interval_ms"] == 10.0
    assert report["over_100ms"] >= 1 and report["max_ms"] >= 200
    assert report["total_lag_s"] >= 0.2 and report["p50_ms"] <= report["max_ms"]


async def test_unset_runs_no_probe_and_writes_nothing(tmp_path: Path) -> None:
    tasks_before = len(asyncio.all_tasks())
    async with loop_lag_probe({}) as probe:
        assert probe is None
        assert len(asyncio.all_tasks()) == tasks_before
    assert not list(tmp_path.iterdir())


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval"):
        LagProbe(0)


def test_pacore_run_writes_its_lag_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "messages": [{"role": "user", "content": f"{i} + 1?"}]})
            + "\n"
            for i in range(3)
        )
    )
    target = tmp_path / "lag.json"
    monkeypatch.setenv(ENV_VAR, str(target))
    with ScriptedServer().run_in_thread() as srv:
        code = main(
            run_argv(
                data, tmp_path / "out.jsonl", "2", "--no-progress",
                base_url=srv.base_url, model="scripted",
            )
        )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads(target.read_text())
    assert report["samples"] >= 1 and report["max_ms"] >= report["p50_ms"] >= 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3
