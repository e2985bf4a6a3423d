"""Inspect AI's ``pacore`` provider with the real package: the ``inspect eval`` CLI and the API.

The upstream is the scripted server's oracle responder (a stated model of the
easy-arithmetic questions), in this process; Inspect runs as its own process
(``inspect eval`` found through our ``inspect_ai`` entry point, offline: the
task is a local file with its samples inline). Its log, read back with
``read_eval_log``, is compared sample by sample with the same method run
directly (:class:`~pacore_graph.integrations.method_runner.MethodRunner`, the
graph ``pacore eval`` runs): the answer, the score it earns, the usage (the
run's effective TTC) and the record in the sample's metadata.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.tool import ToolInfo

from pacore_graph.integrations.inspect_provider import chat_messages, run_context
from pacore_graph.integrations.method_runner import MethodRunner, run_record
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.method_oracle import MethodOracle
from pacore_graph.values.answers import extract_answer

HERE = Path(__file__).parent
TASK = "inspect_arithmetic_task.py"  # relative: Inspect refuses absolute task paths
INSPECT = Path(sys.executable).with_name("inspect")
QUESTION = "What is 17 + 25? Put the final answer in \\boxed{}."


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer(MethodOracle()).run_in_thread() as srv:
        yield srv


def inspect_eval(upstream: ScriptedServer, model: str, log_dir: Path, *args: str) -> EvalLog:
    """``inspect eval`` of the local task as a user runs it; its one log, read back."""
    env = {**os.environ, "INSPECT_LOG_DIR": str(log_dir), "NO_COLOR": "1"}
    done = subprocess.run(
        [
            str(INSPECT),
            "eval",
            TASK,
            "--model",
            model,
            "--model-base-url",
            upstream.base_url,
            "--log-dir",
            str(log_dir),
            "--display",
            "none",
            *args,
        ],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log_file,) = log_dir.glob("*.eval")
    return read_eval_log(str(log_file))


@pytest.fixture(scope="module")
def inspect_run(
    upstream: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[EvalLog, list[dict[str, Any]]]:
    """One ``inspect eval`` of pacore-low, and the upstream requests it made."""
    upstream.reset_log()
    log = inspect_eval(
        upstream,
        "pacore/pacore-low/scripted",
        tmp_path_factory.mktemp("inspect-logs"),
        "--seed",
        "1",
        "--max-tokens",
        "300",
    )
    return log, [r.body for r in upstream.requests]


@pytest.fixture(scope="module")
def low_log(inspect_run: tuple[EvalLog, list[dict[str, Any]]]) -> EvalLog:
    return inspect_run[0]


async def direct(upstream: ScriptedServer, method: str, question: str, **context: Any) -> Any:
    runner = MethodRunner(method, base_url=upstream.base_url, model="scripted")
    try:
        return await runner.run([{"role": "user", "content": question}], context)
    finally:
        await runner.aclose()


async def test_inspect_eval_scores_the_methods_answers(
    low_log: EvalLog, upstream: ScriptedServer
) -> None:
    assert low_log.status == "success"
    assert low_log.samples is not None and len(low_log.samples) == 4
    right = 0
    for sample in low_log.samples:
        question = str(sample.input)
        expected = await direct(upstream, "pacore-low", question, seed=1, max_tokens=300)
        assert sample.output.completion == expected.answer
        found = extract_answer(expected.answer)
        correct = found is not None and found.text == sample.target
        right += correct
        assert sample.scores is not None
        assert sample.scores["pattern"].value == ("C" if correct else "I")
        usage = sample.output.usage
        assert usage is not None
        assert usage.output_tokens == expected.effective_ttc
        assert usage.input_tokens == sum(t.prompt_tokens for t in expected.trajectories)
        (record,) = sample.metadata["pacore"]  # one generate call per sample
        messages = [{"role": "user", "content": question}]
        assert record == run_record(expected, record_method(), messages) | {
            "wall_s": record["wall_s"]
        }
        assert record["widths"] == [4, 1]
        assert all(t["answer"] is not None for rnd in record["rounds"] for t in rnd)
        assert sample.output.metadata == {"pacore": record}
    # The oracle makes both outcomes happen on these four (so the scorer is really checked).
    assert 0 < right < 4
    assert low_log.results is not None
    accuracy = low_log.results.scores[0].metrics["accuracy"].value
    assert accuracy == right / 4
    total = low_log.stats.model_usage["pacore/pacore-low/scripted"]
    assert total.output_tokens == sum(s.output.usage.output_tokens for s in low_log.samples)  # type: ignore[union-attr]


def record_method() -> Any:
    from pacore_graph.integrations.method_runner import parse_method_name

    return parse_method_name("pacore-low")


def test_generate_config_reached_every_upstream_call(
    inspect_run: tuple[EvalLog, list[dict[str, Any]]],
) -> None:
    """``--seed 1 --max-tokens 300`` reached every explorer call (seeds spread per explorer)."""
    log, bodies = inspect_run
    assert log.eval.model_generate_config.seed == 1
    # 4 samples x (one n=4 request for round 1 + the synthesis call).
    assert len(bodies) == 8
    assert all(b["max_tokens"] == 300 for b in bodies)
    assert all(isinstance(b.get("seed"), int) for b in bodies)


async def test_other_methods_by_name_through_inspects_api(upstream: ScriptedServer) -> None:
    config = GenerateConfig(seed=3, temperature=0.5, max_tokens=400)
    for name, widths in [
        ("rsa:3,2,2", [3, 3]),
        ("majority:3", [3]),
        ("deepconf-online:4", None),
        ("aggagent:3", [3, 1]),
    ]:
        model = get_model(f"pacore/{name}/scripted", base_url=upstream.base_url, config=config)
        try:
            output = await model.generate(QUESTION)
        finally:
            await model.api.aclose()
        expected = await direct(upstream, name, QUESTION, seed=3, temperature=0.5, max_tokens=400)
        assert output.completion == expected.answer, name
        assert output.usage is not None and output.usage.output_tokens == expected.effective_ttc
        assert output.metadata is not None
        if widths is not None:
            assert output.metadata["pacore"]["widths"] == widths


async def test_the_served_name_may_come_as_an_argument(upstream: ScriptedServer) -> None:
    model = get_model("pacore/single", base_url=upstream.base_url, upstream="scripted")
    try:
        output = await model.generate(QUESTION, config=GenerateConfig(seed=1))
    finally:
        await model.api.aclose()
    assert output.metadata is not None and output.metadata["pacore"]["family"] == "single"


def test_bad_names_and_settings_are_refused_with_their_reason(upstream: ScriptedServer) -> None:
    with pytest.raises(ValueError, match="unknown model 'nonsense'"):
        get_model("pacore/nonsense/scripted", base_url=upstream.base_url, memoize=False)
    with pytest.raises(ValueError, match="unknown setting"):
        get_model("pacore/pacore-low/scripted", base_url=upstream.base_url, colour="red")


async def test_what_a_method_cannot_honour_is_refused(upstream: ScriptedServer) -> None:
    model = get_model("pacore/pacore:2/scripted", base_url=upstream.base_url, memoize=False)
    tool = ToolInfo(name="calc", description="a calculator")
    try:
        with pytest.raises(ValueError, match="tools are not supported"):
            await model.api.generate(chat_messages_of(QUESTION), [tool], "auto", GenerateConfig())
    finally:
        await model.api.aclose()
    with pytest.raises(ValueError, match="stop_seqs"):
        run_context(GenerateConfig(stop_seqs=["\n"]))
    with pytest.raises(ValueError, match="num_choices"):
        run_context(GenerateConfig(num_choices=2))
    assert run_context(GenerateConfig(temperature=0.2, top_p=0.9, seed=4, max_tokens=9)) == {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 4,
        "max_tokens": 9,
    }


def chat_messages_of(question: str) -> list[Any]:
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser

    messages = [ChatMessageSystem(content="Be brief."), ChatMessageUser(content=question)]
    assert chat_messages(messages) == [  # type: ignore[arg-type]
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": question},
    ]
    return messages
