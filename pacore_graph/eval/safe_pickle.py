"""Unpickling a dataset's field without letting the dataset run code.

LiveCodeBench ships each problem's private tests as base64(zlib(pickle(JSON
text))) (``CodeGenerationProblem.__post_init__`` in
lcb_runner/benchmarks/code_generation.py of github.com/LiveCodeBench/LiveCodeBench
decodes it with ``json.loads(pickle.loads(zlib.decompress(base64.b64decode(...))))``):
the pickle holds one ``str``, the ``json.dumps`` of the test list. A pickle
is a program: a ``__reduce__`` that names ``os.system`` runs a shell command
the moment it is loaded, on the machine that grades. A dataset is data from
the Internet, so :func:`safe_loads` reads the pickle's opcodes first
(:func:`pickletools.genops`, which decodes and builds nothing) and accepts
only those that build text, lists and dicts, plus the framing and memo
opcodes every protocol (0 to 5) writes around them:

- ``str``: what LiveCodeBench's field holds; the only type it needs;
- ``list`` and ``dict`` (of text): the shape of a test list itself
  (``{input, output, testtype}``, every value text), for a copy that pickled
  the structure instead of its JSON. They add no opcode that builds anything
  but a container.

Everything else is refused before anything is loaded, with the type the
opcode would build: numbers, booleans and ``None`` (no real field holds them
outside its JSON text), ``bytes``/``bytearray`` (``json.loads`` would take
bytes, but the released data are text, and a byte string is where a payload
for some other decoder would hide), tuples, sets, Python 2 strings, and every
opcode that names or calls something (``GLOBAL``, ``STACK_GLOBAL``, ``INST``,
``OBJ``, ``REDUCE``, ``BUILD``, extension codes, persistent ids). The
unpickler that then loads the vetted stream refuses any global lookup too,
and the loaded value is checked to be text, lists and dicts all the way down
(shared references, which the memo allows, are checked once; a structure that
contains itself is refused).

The compressed payload is bounded before it is inflated (a 1 KiB zlib
stream can inflate to gigabytes).
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
import pickletools
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

_ALLOWED_OPCODES = frozenset(
    {
        # framing
        "PROTO",
        "FRAME",
        "STOP",
        "MARK",
        # text
        "UNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        # lists and dicts
        "EMPTY_LIST",
        "LIST",
        "APPEND",
        "APPENDS",
        "EMPTY_DICT",
        "DICT",
        "SETITEM",
        "SETITEMS",
        # the memo (shared references)
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "MEMOIZE",
        "GET",
        "BINGET",
        "LONG_BINGET",
    }
)
"""The opcodes a vetted pickle may hold: text, lists and dicts, in any protocol."""

_BUILDS = {
    "a number": ("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4"),
    "a float": ("FLOAT", "BINFLOAT"),
    "a boolean": ("NEWTRUE", "NEWFALSE"),
    "None": ("NONE",),
    "bytes": ("BINBYTES", "SHORT_BINBYTES", "BINBYTES8"),
    "a bytearray": ("BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER"),
    "a Python 2 string": ("STRING", "BINSTRING", "SHORT_BINSTRING"),
    "a tuple": ("TUPLE", "EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"),
    "a set": ("EMPTY_SET", "ADDITEMS", "FROZENSET"),
    "a persistent id": ("PERSID", "BINPERSID"),
}
_WHAT = {opcode: what for what, opcodes in _BUILDS.items() for opcode in opcodes}
_STRING_OPCODES = ("UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8")
_HINT = "a dataset field may hold only text, lists and dicts"


class UnsafePickleError(PaCoReError):
    """A pickled field holds something other than text, lists and dicts: refused, nothing ran."""


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that cannot import: every global lookup is refused."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafePickleError(
            f"the pickle names {module}.{name}: refused ({_HINT}; loading it could run code)"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise UnsafePickleError("the pickle uses a persistent id: refused")


def _refusal(opcode: str, arg: Any, position: int | None, strings: list[str]) -> str:
    """Why an opcode outside :data:`_ALLOWED_OPCODES` is refused, naming what it would build."""
    at = f"opcode {opcode} at byte {position}"
    if opcode in ("GLOBAL", "INST") and isinstance(arg, str):
        module, _, name = arg.partition(" ")
        return f"the pickle names {module}.{name}: refused ({_HINT}; loading it could run code)"
    if opcode == "STACK_GLOBAL" and len(strings) >= 2:  # module and name: the last two texts
        module, name = strings[-2], strings[-1]
        return f"the pickle names {module}.{name}: refused ({_HINT}; loading it could run code)"
    what = "a boolean" if opcode == "INT" and isinstance(arg, bool) else _WHAT.get(opcode)
    if what is None:
        return f"the pickle calls or names something ({at}): refused ({_HINT})"
    return f"the pickle holds {what} ({at}): refused ({_HINT})"


def _vet_opcodes(data: bytes) -> None:
    """Read every opcode (building nothing); refuse the first outside the allowed set."""
    strings: list[str] = []
    try:
        for op, arg, position in pickletools.genops(data):
            if op.name not in _ALLOWED_OPCODES:
                raise UnsafePickleError(_refusal(op.name, arg, position, strings))
            if op.name in _STRING_OPCODES and isinstance(arg, str):
                strings = [*strings[-1:], arg[:200]]
    except UnsafePickleError:
        raise
    except Exception as exc:  # truncated or corrupt stream: ValueError, UnicodeDecodeError, ...
        raise UnsafePickleError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None


def _check_plain(value: Any) -> None:
    """Belt and braces: the loaded value is text, lists and dicts all the way down.

    Iterative, and each container is checked once: the memo lets a pickle
    reference one list many times (a few hundred bytes can describe 2**100
    paths through shared lists), which a plain recursive walk would follow
    every time. A container reached again on its own path contains itself.
    """
    done: set[int] = set()
    stack: list[tuple[Any, int, frozenset[int]]] = [(value, 0, frozenset())]
    while stack:
        item, depth, path = stack.pop()
        if type(item) is str:
            continue
        if type(item) not in (list, dict):
            raise UnsafePickleError(f"the pickle holds a {type(item).__name__}: refused ({_HINT})")
        if id(item) in path:
            raise UnsafePickleError("the pickle holds a container that contains itself: refused")
        if id(item) in done:
            continue
        if depth >= 100:
            raise UnsafePickleError("the pickle nests deeper than 100 levels")
        done.add(id(item))
        inner = path | {id(item)}
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        stack.extend((child, depth + 1, inner) for child in children)


def safe_loads(data: bytes) -> Any:
    """``pickle.loads`` for text, lists and dicts only; :class:`UnsafePickleError` otherwise.

    A pickle that is merely broken raises :class:`UnsafePickleError` too (with
    the reason), so a caller has one error to report.
    """
    _vet_opcodes(data)
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # truncated or corrupt stream: UnpicklingError, EOFError, ...
        raise UnsafePickleError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None
    _check_plain(value)
    return value


def decode_compressed_pickle(text: str, *, max_bytes: int = MAX_INFLATED_BYTES) -> Any:
    """base64 text -> zlib -> pickle, as LiveCodeBench stores private tests; plain text only."""
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
