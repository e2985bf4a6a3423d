"""The safe unpickler: plain data loads, anything naming a callable is refused and never runs."""

from __future__ import annotations

import base64
import collections
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest
from hub_fixtures import lcb_private

from pacore_graph.eval.safe_pickle import (
    UnsafePickleError,
    decode_compressed_pickle,
    safe_loads,
)


class _Touch:
    """A pickle that, loaded by ``pickle.loads``, runs ``touch MARKER`` through os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _compress(payload: bytes) -> str:
    return base64.b64encode(zlib.compress(payload)).decode("ascii")


def test_livecodebench_encoding_round_trips() -> None:
    tests = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    assert json.loads(decode_compressed_pickle(lcb_private(tests))) == tests


def test_plain_containers_load() -> None:
    value = {"a": [1, 2.5, None, True, ("t", b"b")], "s": "x"}
    assert safe_loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)) == value


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_os_system_pickle_is_refused_and_nothing_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Touch(marker), protocol=protocol)
    with pytest.raises(UnsafePickleError, match=r"names (posix|os)\.system: refused"):
        decode_compressed_pickle(_compress(payload))
    assert not marker.exists()
    # the fixture is armed: the standard unpickler would have run it
    pickle.loads(payload)
    assert marker.exists()


@pytest.mark.parametrize(
    "value",
    [collections.OrderedDict(a=1), {1, 2}, complex(1, 2)],
    ids=["OrderedDict", "set-via-builtins", "complex"],
)
def test_any_class_is_refused(value: object) -> None:
    payload = pickle.dumps(value, protocol=2)
    with pytest.raises(UnsafePickleError, match="refused"):
        safe_loads(payload)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not base64 !!", "not base64"),
        (base64.b64encode(b"plain bytes").decode(), "not zlib-compressed"),
        (_compress(b"garbage"), "not a readable pickle"),
        (base64.b64encode(zlib.compress(pickle.dumps("x"))[:-6]).decode(), "cut short"),
    ],
)
def test_broken_fields_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(UnsafePickleError, match=message):
        decode_compressed_pickle(text)


def test_inflation_is_bounded() -> None:
    bomb = _compress(pickle.dumps("x" * 200_000))
    with pytest.raises(UnsafePickleError, match="more than 1000 bytes"):
        decode_compressed_pickle(bomb, max_bytes=1000)
    assert decode_compressed_pickle(bomb, max_bytes=300_000) == "x" * 200_000
