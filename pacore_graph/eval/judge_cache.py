"""Judge verdicts on disk, so a resumed or repeated eval never pays for the same verdict twice.

One JSON line per verdict, appended as soon as it is known, keyed by a hash
of everything the verdict depends on: the rubric, the judge model, the
question, the expected answer (or pass criterion) and the response judged.
A line cut short by a crash is skipped when the file is read back; nothing
else is lost. Only parsed verdicts are stored: an ``unparsed`` one or a
failed call is asked again next time.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

from pacore_graph.runs.jsonl import open_append

__all__ = ["CachedVerdict", "JudgeCache", "verdict_key"]


def verdict_key(rubric: str, model: str, question: str, expected: str, response: str) -> str:
    """SHA-256 over the verdict's inputs, each length-prefixed (no two collide by joining)."""
    digest = hashlib.sha256()
    for part in (rubric, model, question, expected, response):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    """A verdict as it was first given: the judge's reading and what it cost."""

    verdict: str
    tokens: int
    text: str


class JudgeCache:
    """Verdicts by key, read from ``path`` at start and appended to it (thread-safe)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._entries: dict[str, CachedVerdict] = {}
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._entries[str(row["key"])] = CachedVerdict(
                        str(row["verdict"]), int(row.get("tokens", 0)), str(row.get("text", ""))
                    )
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a crash

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CachedVerdict | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, verdict: CachedVerdict) -> None:
        """Remember ``verdict`` and append it to the file (created with its folder)."""
        with self._lock:
            self._entries[key] = verdict
            if self.path is None:
                return
            row = {"key": key, "verdict": verdict.verdict, "tokens": verdict.tokens}
            row["text"] = verdict.text[-2000:]
            with open_append(self.path) as sink:  # private, as all an eval writes
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
