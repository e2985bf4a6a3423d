"""``pacore model serve`` with no folder: the embedded model in the foreground, for any client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import openai
import pytest
from embedded_support import require_embedded

pytestmark = pytest.mark.embedded


def test_model_serve_without_a_folder_serves_the_embedded_model_to_the_openai_sdk() -> None:
    require_embedded()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PACORE_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pacore_graph.cli", "model", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        fields = dict(part.split("=", 1) for part in line.split())
        assert fields["model"] == "smollm2-135m-instruct", line
        assert fields["base_url"].startswith("http://127.0.0.1:")
        assert not fields["base_url"].endswith(":0/v1")  # the bound port, not the asked 0

        client = openai.OpenAI(base_url=fields["base_url"], api_key="any", max_retries=0)
        assert [m.id for m in client.models.list()] == ["smollm2-135m-instruct"]
        response = client.chat.completions.create(
            model=fields["model"],
            messages=[{"role": "user", "content": "Name a colour."}],
            n=2,
            max_tokens=8,
        )
        assert len(response.choices) == 2
        assert all(c.message.content for c in response.choices)
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "serving smollm2-135m-instruct at" in stderr
