"""cli/model: ``pacore model`` refuses before any model is loaded: one line, exit 2, no file.

Serving and exporting a real model are the rl and embedded layers' tests
(tests/rl/test_model_export.py, tests/rl/test_model_server.py,
tests/embedded/); here ``main`` runs in-process on paths that cannot work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pacore_graph.cli import EXIT_USAGE, main


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and "\n" not in err, err
    return err


def test_serving_a_folder_that_is_not_a_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "weights.bin").write_bytes(b"")
    assert main(["model", "serve", str(tmp_path), "--port", "1"]) == EXIT_USAGE
    assert one_line_error(capsys).endswith(f"{tmp_path} is not a model folder (no config.json)")


def test_exporting_from_a_missing_gguf_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, gguf = tmp_path / "export", tmp_path / "missing.gguf"
    assert main(["model", "export", "--out", str(out), "--gguf", str(gguf)]) == EXIT_USAGE
    assert one_line_error(capsys).endswith(f"GGUF file {gguf} does not exist")
    assert not out.exists()
