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


def test_serving_off_loopback_needs_allow_no_auth_and_then_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: ``--host`` off loopback bound the network with no key and no word."""
    for host in ("0.0.0.0", "::", "192.168.1.20", "my-host"):
        for folder in ([str(tmp_path)], []):  # a model folder, and the embedded model
            assert main(["model", "serve", *folder, "--host", host, "--port", "1"]) == EXIT_USAGE
            err = one_line_error(capsys)
            assert f"--host {host} is reachable from other machines" in err
            assert "--allow-no-auth" in err and "--api-key" in err
    # Allowed: the warning, then the server would start (here: the folder is no model).
    argv = ["model", "serve", str(tmp_path), "--host", "0.0.0.0", "--allow-no-auth", "--port", "1"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "WARNING: serving on 0.0.0.0 WITHOUT AUTHENTICATION" in err
    assert err.strip().endswith("is not a model folder (no config.json)")
    for host in ("127.0.0.1", "::1", "localhost"):
        assert main(["model", "serve", str(tmp_path), "--host", host, "--port", "1"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "WARNING" not in err and "not a model folder" in err
