"""The tiny offline Llama: random weights and SmolLM2's real tokenizer, reused when built."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_tiny_model_has_smollm2_tokenizer_and_chat_template(tiny_model: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from pacore_graph.rl.tiny import TinyModelSpec, build_tiny_model

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    assert len(tok) == 49152 and tok.pad_token is not None
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    ids = tok("What is 2 + 3?")["input_ids"]
    assert tok.decode(ids) == "What is 2 + 3?" and len(ids) < 10  # a real BPE vocabulary
    cfg = AutoConfig.from_pretrained(str(tiny_model))
    spec = TinyModelSpec()  # the fixture's: the shape comes from the spec, the vocabulary from tok
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size) == (
        spec.num_hidden_layers,
        spec.hidden_size,
        len(tok),
    )
    before = (tiny_model / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tiny_model) == tiny_model  # same spec: reused, not rebuilt
    assert (tiny_model / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"hidden_size": 0}, "hidden_size must be >= 1"),
        ({"hidden_size": 66, "num_attention_heads": 4}, "multiple of num_attention_heads"),
        ({"num_attention_heads": 4, "num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    ],
)
def test_a_spec_that_cannot_make_a_model_is_refused(kwargs: dict[str, int], match: str) -> None:
    """Checked when the spec is made, before torch is imported or anything is written."""
    from pacore_graph.rl.tiny import TinyModelSpec

    with pytest.raises(ValueError, match=match):
        TinyModelSpec(**kwargs)
