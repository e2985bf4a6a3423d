"""The closed loop's pieces: a trained folder served on the CPU answers ``n`` real samples.

The server is the real one on a real socket, the client the ``openai`` SDK
and the project's own client; the model is the tiny offline Llama (random
weights, SmolLM2's tokenizer), whose next-token distribution is close to
uniform, so samples at temperature 1.0 differ and greedy ones agree.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path

import pytest

from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.cli import main
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_served_folder_honours_n_and_samples_at_temperature_one(
    tiny_model: Path,
) -> None:
    openai = pytest.importorskip("openai")
    from pacore_graph.rl.model_server import ModelServer

    with ModelServer(tiny_model, name="tiny").run_in_thread() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="none")
        messages = [{"role": "user", "content": "What is 2 + 3?"}]
        sampled = client.chat.completions.create(
            model="tiny", messages=messages, n=4, max_tokens=8, temperature=1.0, seed=1
        )
        assert len(sampled.choices) == 4
        texts = [c.message.content for c in sampled.choices]
        assert len(set(texts)) > 1  # real samples, not one answer copied n times
        assert sampled.usage is not None
        assert sampled.usage.prompt_tokens > 5 and 4 <= sampled.usage.completion_tokens <= 32
        assert all(c.finish_reason in ("stop", "length") for c in sampled.choices)
        again = client.chat.completions.create(
            model="tiny", messages=messages, n=4, max_tokens=8, temperature=1.0, seed=1
        )
        assert [c.message.content for c in again.choices] == texts  # seeded: reproducible
        greedy = client.chat.completions.create(
            model="tiny", messages=messages, n=3, max_tokens=8, temperature=0
        )
        assert len({c.message.content for c in greedy.choices}) == 1
        assert client.models.list().data[0].id == "tiny"
        with pytest.raises(openai.BadRequestError, match="stop"):
            client.chat.completions.create(model="tiny", messages=messages, stop=["x"])


def test_a_pacore_run_against_the_served_folder(tiny_model: Path) -> None:
    from pacore_graph.rl.model_server import ModelServer

    async def run(base_url: str) -> tuple[int, int, int]:
        retry = ModelRetryPolicy(max_attempts=1)
        client = OpenAICompatClient(base_url, "tiny", retry=retry)
        config = PaCoReConfig(rounds=[3], sampling={"max_tokens": 6, "seed": 7}, retry=retry)
        try:
            result = await ainvoke_pacore(build_pacore_graph(client, config=config), "2 + 3?")
        finally:
            await client.aclose()
        return len(result.rounds[0]), len(result.rounds[1]), result.failures

    with ModelServer(tiny_model, name="tiny").run_in_thread() as server:
        assert asyncio.run(run(server.base_url)) == (3, 1, 0)


def test_model_commands_give_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["model", "serve", str(tmp_path / "nowhere"), "--port", "0"]) == 2
    assert "not a model folder" in capsys.readouterr().err
    assert main(["model", "export", "--out", str(tmp_path / "o"), "--gguf", "x.gguf"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_train_and_eval_example_closes_the_loop(tiny_model: Path, tmp_path: Path) -> None:
    """examples/train_and_eval.py, small: evaluate, episodes, PPO, evaluate the trained folder.

    On the session's tiny model (``--model``): the example's default builds
    the same folder with ``build_tiny_model``, which tests/rl/test_tiny.py and
    the ``tiny_model`` fixture cover; building it again here cost a GGUF parse.
    """
    pytest.importorskip("trl")
    sys.path.insert(0, str(EXAMPLES))
    try:
        example = importlib.import_module("train_and_eval")
    finally:
        sys.path.remove(str(EXAMPLES))
    summary = example.main(
        [
            "--work", str(tmp_path / "loop"),
            "--model", str(tiny_model),
            "--eval-problems", "2",
            "--train-problems", "2",
            "--steps", "1",
            "--batch-size", "2",
            "--max-tokens", "8",
        ]
    )  # fmt: skip
    assert set(summary["before"]) == set(summary["after"]) == {"single", "pacore:low"}
    assert summary["training"]["steps"] == 1
    assert summary["training"]["peak_rss_gb"] > 0
    assert (tmp_path / "loop" / "trained-ppo" / "model.safetensors").is_file()
    after = [json.loads(x) for x in (tmp_path / "loop" / "after" / "results.jsonl").open()]
    assert len([x for x in after if "score" in x]) == 4  # 2 problems x 2 methods, all graded
