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

Memory is bounded before anything is expanded:

- the compressed payload before it is inflated (a 1 KiB zlib stream can
  inflate to gigabytes): :data:`MAX_INFLATED_BYTES`;
- the unpickler's memo table before loading: the C unpickler grows it to
  twice any index it is told to store at, so one ``LONG_BINPUT 268435456``
  in a 130 KB row made it zero 4 GiB (issue 31). A pickler numbers its memo
  0, 1, 2, ...; an index beyond the next free one is refused while the
  opcodes are read, and the table then stays as small as the pickle;
- the loaded value's size *written out*: shared references cost the loaded
  value 8 bytes each, but anyone who copies it out (``json.dumps``, a
  results line) pays for every copy; 60,000 references to one 64 KiB text
  are 190 KB of pickle and 3.9 GB of JSON. The check adds up that size over
  the value's graph, each shared container once, and refuses a value past
  :data:`MAX_EXPANDED_SIZE` before handing it out.
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
    "MAX_EXPANDED_SIZE",
    "MAX_INFLATED_BYTES",
    "UnsafePickleError",
    "decode_compressed_pickle",
    "safe_loads",
]

MAX_INFLATED_BYTES = 1 << 30
"""The most a compressed field may inflate to (1 GiB; LiveCodeBench's largest are tens of MB)."""

MAX_EXPANDED_SIZE = MAX_INFLATED_BYTES
"""The most a value may hold written out in full, in characters (every shared reference
copied; one per list item and dict entry besides the text): a value is never bigger
spelled out than the most a field may inflate to."""

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
_PUT_OPCODES = ("PUT", "BINPUT", "LONG_BINPUT")
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
    """Read every opcode (building nothing); refuse the first outside the allowed set.

    Memo slots must be numbered as a pickler numbers them (each new one the
    next free index), so the unpickler's memo table stays the pickle's size.
    """
    strings: list[str] = []
    memo = 0  # slots used: a new one must be exactly this index
    try:
        for op, arg, position in pickletools.genops(data):
            if op.name not in _ALLOWED_OPCODES:
                raise UnsafePickleError(_refusal(op.name, arg, position, strings))
            if op.name in _STRING_OPCODES and isinstance(arg, str):
                strings = [*strings[-1:], arg[:200]]
            elif op.name == "MEMOIZE":
                memo += 1
            elif op.name in _PUT_OPCODES:
                if not isinstance(arg, int) or not 0 <= arg <= memo:
                    raise UnsafePickleError(
                        f"the pickle's memo index {arg} (opcode {op.name} at byte {position}) "
                        f"skips ahead of the {memo} slots used: refused (a pickler numbers "
                        "them 0, 1, 2...; the unpickler would allocate a table that large)"
                    )
                memo += arg == memo
    except UnsafePickleError:
        raise
    except Exception as exc:  # truncated or corrupt stream: ValueError, UnicodeDecodeError, ...
        raise UnsafePickleError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None


def _check_plain(value: Any, max_expanded: int) -> None:
    """Belt and braces: text, lists and dicts all the way down, and not too big written out.

    Iterative, and each container is measured once: the memo lets a pickle
    reference one list many times (a few hundred bytes can describe 2**100
    paths through shared lists), which a plain recursive walk would follow
    every time. Its size written out (text with every copy, one per item) is
    the sum of its children's, so a shared container adds its known size
    again without being walked again. A container reached again on its own
    path contains itself. Nothing is copied: the walk adds integers.
    """
    if type(value) is str:
        if len(value) > max_expanded:
            raise UnsafePickleError(_too_big(max_expanded))
        return
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[list[Any]] = []

    def enter(item: Any) -> None:
        if type(item) not in (list, dict):
            raise UnsafePickleError(f"the pickle holds a {type(item).__name__}: refused ({_HINT})")
        if len(stack) >= 100:
            raise UnsafePickleError("the pickle nests deeper than 100 levels")
        children = iter([*item.keys(), *item.values()] if isinstance(item, dict) else item)
        stack.append([item, children, 0])
        on_path.add(id(item))

    enter(value)
    while stack:
        frame = stack[-1]
        child = next(frame[1], _END)
        if child is _END:
            stack.pop()
            on_path.discard(id(frame[0]))
            sizes[id(frame[0])] = frame[2]
            if stack:
                stack[-1][2] += frame[2]
            continue
        if type(child) is str:
            frame[2] += len(child) + 1
        elif id(child) in on_path:
            raise UnsafePickleError("the pickle holds a container that contains itself: refused")
        elif id(child) in sizes:
            frame[2] += sizes[id(child)] + 1
        else:
            frame[2] += 1
            enter(child)
            continue
        if frame[2] > max_expanded:
            raise UnsafePickleError(_too_big(max_expanded))
    if sizes[id(value)] > max_expanded:
        raise UnsafePickleError(_too_big(max_expanded))


_END = object()


def _too_big(limit: int) -> str:
    return (
        f"the pickle expands to more than {limit} characters written out (its shared "
        "references copied): refused"
    )


def safe_loads(data: bytes, *, max_expanded: int = MAX_EXPANDED_SIZE) -> Any:
    """``pickle.loads`` for text, lists and dicts only; :class:`UnsafePickleError` otherwise.

    A pickle that is merely broken raises :class:`UnsafePickleError` too (with
    the reason), so a caller has one error to report; so does one whose
    value holds more than ``max_expanded`` characters written out.
    """
    _vet_opcodes(data)
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # truncated or corrupt stream: UnpicklingError, EOFError, ...
        raise UnsafePickleError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None
    _check_plain(value, max_expanded)
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
