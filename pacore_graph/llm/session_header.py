"""The per-run session header: every request of one PaCoRe run names the run.

Why: at scale the model is served by a fleet behind one OpenAI endpoint (Ray
Serve LLM, llm-d, vLLM's production-stack router). Those routers can keep a
session on one replica (Ray Serve LLM hashes a session header; the others
score prefix-cache hits), and one PaCoRe run re-sends its problem and the
previous round's messages in every round: on one replica those prefixes are
already cached. So the client sends ``x-session-id: <run id>`` (the header
name is a client setting, ``--session-header``; ``none`` turns it off) on
every request of a run: every round, retry, ``n``-split and stream.

How the run id reaches the client with the least surface: the graph's
explore node enters :func:`session_scope` with the run's id around its
explorer, and the client reads :func:`current_session` when it sends a
request. A context variable, not an argument of every client method, so the
chat-client protocols (and every custom client) stay as they are; asyncio
copies it into the tasks a call starts (the batcher's shared ``n=K`` fetch
is one run's: its group key holds the run id), and it is unset outside a run
(no header then).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pacore_graph.settings.fields import SETTINGS

__all__ = [
    "DEFAULT_SESSION_HEADER",
    "current_session",
    "parse_session_header",
    "session_headers",
    "session_scope",
]

#: The header a run's id is sent in unless ``--session-header`` renames it (its row's default).
DEFAULT_SESSION_HEADER: str = SETTINGS["session_header"].default

#: ``--session-header`` values that turn the header off.
_OFF = frozenset({"none", "off", ""})

#: An HTTP header name (RFC 9110 ``token``).
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

_SESSION: ContextVar[str | None] = ContextVar("pacore_session", default=None)


def parse_session_header(text: str | None) -> str | None:
    """``--session-header`` -> the header name, or None when turned off (``none``).

    ``None`` (not given) is the default name. Raises ``ValueError`` (one line)
    for a name HTTP does not allow.
    """
    if text is None:
        return DEFAULT_SESSION_HEADER
    name = text.strip()
    if name.lower() in _OFF:
        return None
    if not _TOKEN.match(name):
        raise ValueError(
            f"session header {text!r} is not an HTTP header name "
            "(letters, digits and -_.!#$%&'*+^`|~), or none to send no session header"
        )
    return name


@contextmanager
def session_scope(session_id: str | None) -> Iterator[None]:
    """Requests sent inside the block (and in tasks it starts) carry ``session_id``."""
    token = _SESSION.set(session_id)
    try:
        yield
    finally:
        _SESSION.reset(token)


def current_session() -> str | None:
    """The session of the run this code runs for, None outside a run."""
    return _SESSION.get()


def session_headers(name: str | None) -> dict[str, str] | None:
    """The header a request sends now: ``{name: session}``, None when off or outside a run."""
    if name is None:
        return None
    session = _SESSION.get()
    return None if session is None else {name: session}
