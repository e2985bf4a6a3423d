"""The README is a landing page whose reference lives in ``docs/``.

A relative link that points nowhere (a page renamed, an image moved, a link
written for the README's folder inside a page of ``docs/``) is invisible until
a reader clicks it, so every relative link of README.md, CHANGELOG.md and
``docs/*.md`` must name an existing file, and every page of ``docs/`` must be
reachable from the README (directly, or through a page the README links).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"```.*?```", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def _relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_every_relative_link_names_an_existing_file() -> None:
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in _pages()
        for target in _relative_links(page)
        if not (page.parent / target.split("#")[0]).exists()
    ]
    assert broken == []


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        todo += [(page.parent / t.split("#")[0]).resolve() for t in _relative_links(page)]
    unreachable = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in seen)
    assert unreachable == []
