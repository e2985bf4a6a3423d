"""Unpickling a dataset's field without letting the dataset run code.

LiveCodeBench ships each problem's private tests as base64(zlib(pickle(JSON
text))) (``CodeGenerationProblem.__post_init__`` in
lcb_runner/benchmarks/code_generation.py of github.com/LiveCodeBench/LiveCodeBench
decodes it with a bare ``pickle.loads``). A pickle is a program: a
``__reduce__`` that names ``os.system`` runs a shell command the moment it is
loaded, on the machine that grades. A dataset is data from the Internet, so
:func:`safe_loads` loads only what a pickle can build *without* naming a
callable: strings, bytes, numbers, booleans, None, lists, tuples and dicts.
Every opcode that would import something (``GLOBAL``, ``STACK_GLOBAL``,
``INST``, ``OBJ``' class, extension codes) goes through
:meth:`pickle.Unpickler.find_class`, which here refuses; persistent ids are
refused too. Nothing is imported and nothing is called.

The compressed payload is bounded before it is inflated (a 1 KiB zlib
stream can inflate to gigabytes).
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
import zlib
from typing import Any, NoReturn

from pacore_graph.errors import PaCoReError

__all__ = [
    "MAX_INFLATED_BYTES",
    "UnsafePickleError",
    "decode_compressed_pickle",
    "safe_loads",
]

MAX_INFLATED_BYTES = 1 << 30
"""The most a compressed field may inflate to (1 GiB; LiveCodeBench's largest are tens of MB)."""

_PLAIN = (str, bytes, int, float, bool, type(None))


class UnsafePickleError(PaCoReError, ValueError):
    """A pickled field names a callable or a class: refused, nothing was run."""


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that cannot import: every global lookup is refused."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafePickleError(
            f"the pickle names {module}.{name}: refused (a dataset field may hold only "
            "strings, numbers, lists and dicts; loading it could run code)"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise UnsafePickleError("the pickle uses a persistent id: refused")


def _check_plain(value: Any, depth: int = 0) -> None:
    """Belt and braces: the loaded value is plain data all the way down."""
    if depth > 100:
        raise UnsafePickleError("the pickle nests deeper than 100 levels")
    if isinstance(value, _PLAIN):
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_plain(item, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, depth + 1)
            _check_plain(item, depth + 1)
        return
    raise UnsafePickleError(f"the pickle holds a {type(value).__name__}: refused")


def safe_loads(data: bytes) -> Any:
    """``pickle.loads`` for plain data only; raises :class:`UnsafePickleError` otherwise.

    A pickle that is merely broken raises :class:`UnsafePickleError` too (with
    the reason), so a caller has one error to report.
    """
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # truncated or corrupt stream: UnpicklingError, EOFError, ...
        raise UnsafePickleError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None
    _check_plain(value)
    return value


def decode_compressed_pickle(text: str, *, max_bytes: int = MAX_INFLATED_BYTES) -> Any:
    """base64 text -> zlib -> pickle, as LiveCodeBench stores private tests; plain data only."""
    try:
        raw = base64.b64decode("".join(text.split()).encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise UnsafePickleError(f"not base64 text ({exc})") from None
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(raw, max_bytes)
    except zlib.error as exc:
        raise UnsafePickleError(f"not zlib-compressed ({exc})") from None
    if inflater.unconsumed_tail:
        raise UnsafePickleError(f"inflates to more than {max_bytes} bytes: refused")
    if not inflater.eof:
        raise UnsafePickleError("the zlib stream is cut short")
    return safe_loads(inflated)
