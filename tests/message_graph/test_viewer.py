"""The message graph as an HTML page, opened in a real headless Chromium.

The run is hand-made so that every mark has something to show: a failed
call, a truncated one, references read in an order that is not the index
order (an edge drawn from the wrong side or with the wrong position shows),
and a trajectory that wrote ``<script>`` and an ``<svg onload>`` as its
answer, which the page must show and never run. The page is made by the real
``pacore graph ... --out run.html`` command from a results file, then driven
over the DevTools protocol (tests/browser_support.py): load, count, click,
hover, screenshot.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser_support import Page, open_browser, pixel_difference

from pacore_graph.message_graph import answer_colors, message_graph, message_graph_html
from pacore_graph.values.records import PaCoReResult, Trajectory

HOSTILE = "</script><script>window.__pwned = 1</script>"
#: An answer the extractor keeps whole (no spaces), which runs if put into HTML unescaped.
HOSTILE_ANSWER = "<svg/onload=window.__pwned=2>"
SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "message-graph-viewer.png"
#: Share of pixels allowed to differ from the stored screenshot (see the test).
MAX_DIFFERENT = 0.004


def ok(r: int, i: int, answer: str, refs: tuple[int, ...] = (), **kw: object) -> Trajectory:
    content = f"So the answer is \\boxed{{{answer}}}."
    return Trajectory(
        round=r,
        index=i,
        content=content,
        reasoning=f"r{r}.{i} reasons about {answer}",
        message=content,
        finish_reason=str(kw.pop("finish_reason", "stop")),
        prompt_tokens=20 + 10 * r,
        completion_tokens=7 + i,
        latency_s=0.25,
        references=refs,
    )


def the_run() -> PaCoReResult:
    hostile = Trajectory(
        round=0,
        index=3,
        content=f"{HOSTILE} So \\boxed{{{HOSTILE_ANSWER}}}",
        reasoning=HOSTILE,
        message=f"\\boxed{{{HOSTILE_ANSWER}}}",
        finish_reason="stop",
        prompt_tokens=20,
        completion_tokens=9,
    )
    rounds = (
        (
            ok(0, 0, "42"),
            Trajectory(round=0, index=1, error="HTTP 500 from http://127.0.0.1:9/v1: boom"),
            ok(0, 2, "41", finish_reason="length"),
            hostile,
        ),
        (ok(1, 0, "42", (2, 0, 3)), ok(1, 1, "41", (0, 3, 2))),
        (ok(2, 0, "42", (1, 0)),),
    )
    return PaCoReResult(
        answer=rounds[-1][0].message or "",
        reasoning=None,
        rounds=rounds,
        schedule=(4, 2, 1),
        problem_id="p1",
        model="scripted",
    )


@pytest.fixture
def page_file(tmp_path: Path) -> Path:
    """``pacore graph results.jsonl --id p1 --out run.html``, by the real command."""
    line = {
        **the_run().to_dict(),
        "id": "p1",
        "messages": [{"role": "user", "content": "What is 6 x 7? <b>bold?</b>"}],
        "ground_truth": "42",
    }
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(line) + "\n", encoding="utf-8")
    out = tmp_path / "run.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            "graph",
            str(results),
            "--id",
            "p1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote {out}"
    return out


async def opened(page: Page, path: Path) -> None:
    await page.goto(path.as_uri(), width=1200, height=640)


def test_run_text_is_escaped_and_the_page_fetches_nothing() -> None:
    result = the_run()
    page = message_graph_html(message_graph(result, ground_truth="42"), result)
    assert "<script>window.__pwned" not in page
    assert HOSTILE_ANSWER not in page and "<svg/" not in page
    assert page.count("<script") == 2  # the data and the page's own script
    # Self-contained: nothing to fetch (the SVG namespace is a name, not a request).
    assert re.findall(r"<[^>]*\s(?:src|href)\s*=|@import|url\(", page) == []
    assert "default-src 'none'" in page  # and the browser is told to fetch nothing


async def test_the_page_loads_cleanly_with_every_node_and_edge(page_file: Path) -> None:
    result = the_run()
    async with open_browser() as browser, browser.page() as page:
        await opened(page, page_file)
        nodes = await page.evaluate(
            "[...document.querySelectorAll('.trajectory')].map(n =>"
            " [n.dataset.id, +n.dataset.round, +n.dataset.index, n.className])"
        )
        edges = await page.evaluate(
            "[...document.querySelectorAll('.edge')].map(e =>"
            " [e.dataset.source, e.dataset.target, +e.dataset.position])"
        )
        assert page.errors == []
        pwned = await page.evaluate("typeof window.__pwned")
    assert sorted((n[1], n[2]) for n in nodes) == [(t.round, t.index) for t in result.trajectories]
    assert all(n[0] == f"r{n[1]}.{n[2]}" for n in nodes)
    classes = {n[0]: n[3].split() for n in nodes}
    assert "failed" in classes["r0.1"] and "truncated" in classes["r0.2"]
    assert "correct" in classes["r2.0"] and "incorrect" in classes["r1.1"]
    expected = sorted(
        (f"r{t.round - 1}.{ref}", t.id, position)
        for t in result.trajectories
        for position, ref in enumerate(t.references, start=1)
    )
    assert sorted(tuple(e) for e in edges) == expected
    assert pwned == "undefined"


def _rgb(hex_color: str) -> str:
    """``#1f77b4`` as ``getComputedStyle`` writes it: ``rgb(31, 119, 180)``."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


async def test_each_trajectory_is_coloured_by_its_answer(page_file: Path) -> None:
    """Same answer, same fill; different answers (and a failed call), different fills.

    Read as the browser paints them (computed ``background-color``), and the
    same colours as the PNG's (:func:`answer_colors`), so the page's legend
    and the picture agree.
    """
    graph = message_graph(the_run(), ground_truth="42")
    async with open_browser() as browser, browser.page() as page:
        await opened(page, page_file)
        fills = dict(
            await page.evaluate(
                "[...document.querySelectorAll('.trajectory')].map(n =>"
                " [n.dataset.id, getComputedStyle(n).backgroundColor])"
            )
        )
        assert page.errors == []
    assert set(fills) == set(graph.nodes)
    by_answer: dict[str, set[str]] = {}
    for node, attrs in graph.nodes(data=True):
        if not attrs["failed"]:
            by_answer.setdefault(attrs["answer"], set()).add(fills[node])
    # 42 written in all three rounds, 41 in two, the hostile answer once.
    assert {a: len([n for n in graph if graph.nodes[n]["answer"] == a]) for a in by_answer} == {
        "42": 3,
        "41": 2,
        HOSTILE_ANSWER: 1,
    }
    assert all(len(colours) == 1 for colours in by_answer.values()), by_answer
    colour = {answer: next(iter(colours)) for answer, colours in by_answer.items()}
    assert len(set(colour.values())) == len(colour), colour  # one colour per answer
    assert fills["r0.1"] not in colour.values()  # the failed call is none of them
    assert colour == {a: _rgb(c) for a, c in answer_colors(graph).items()}


async def test_a_click_opens_that_trajectory(page_file: Path) -> None:
    async with open_browser() as browser, browser.page() as page:
        await opened(page, page_file)
        x, y = await page.center_of('.trajectory[data-id="r1.1"]')
        await page.click(x, y)
        shown = await page.evaluate("document.getElementById('details').dataset.id")
        text = str(await page.evaluate("document.getElementById('details').innerText"))
        lit = await page.evaluate(
            "[...document.querySelectorAll('.edge.lit')].map(e => e.dataset.source)"
        )
        x, y = await page.center_of('.trajectory[data-id="r0.1"]')
        await page.click(x, y)
        failed = str(await page.evaluate("document.getElementById('details').innerText"))
        assert page.errors == []
    assert shown == "r1.1"
    assert "r1.1 reasons about 41" in text and "So the answer is \\boxed{41}." in text
    assert "30 prompt, 8 completion" in text and "stop" in text
    # The prompt: the problem, then the messages read in prompt order (r0.0, r0.3, r0.2).
    assert "What is 6 x 7? <b>bold?</b>" in text
    assert (
        text.index("Reference 1 (r0.0)")
        < text.index("Reference 2 (r0.3)")
        < text.index("Reference 3 (r0.2)")
    )
    assert sorted(lit) == ["r0.0", "r0.2", "r0.3"]
    assert "HTTP 500 from http://127.0.0.1:9/v1: boom" in failed and "(failed call)" in failed


async def test_hovering_an_edge_shows_the_references_position(page_file: Path) -> None:
    async with open_browser() as browser, browser.page() as page:
        await opened(page, page_file)
        # A point on the curve r1.0 -> r2.0 (half way along it), in viewport coordinates.
        x, y = await page.evaluate(
            "(() => { const p = document.querySelector("
            '\'.edge[data-source="r1.0"][data-target="r2.0"] .hit\');'
            " const pt = p.getPointAtLength(p.getTotalLength() / 2);"
            " const box = document.getElementById('edges').getBoundingClientRect();"
            " return [box.left + pt.x, box.top + pt.y]; })()"
        )
        await page.move(x, y)
        tip = await page.evaluate(
            "[getComputedStyle(document.getElementById('tip')).display,"
            " document.getElementById('tip').textContent]"
        )
    # r2.0 read r1.1 then r1.0: this edge is its second reference.
    assert tip == ["block", "r1.0 → r2.0: reference 2 of 2 in r2.0's prompt"]


async def test_script_in_a_trajectory_is_shown_not_run(page_file: Path) -> None:
    async with open_browser() as browser, browser.page() as page:
        await opened(page, page_file)
        x, y = await page.center_of('.trajectory[data-id="r0.3"]')
        await page.click(x, y)
        await asyncio.sleep(0.2)
        text = str(await page.evaluate("document.getElementById('details').innerText"))
        pwned = await page.evaluate("typeof window.__pwned")
        injected = await page.evaluate("document.querySelectorAll('#canvas svg').length")
        assert page.errors == []
    assert pwned == "undefined" and injected == 1  # the edges' own svg only
    assert HOSTILE in text and HOSTILE_ANSWER in text


async def test_the_page_looks_as_it_did(page_file: Path, tmp_path: Path) -> None:
    """A screenshot compared with the stored one, tolerantly.

    Exact pixels would break on a Chromium or font update (anti-aliasing,
    hinting), so two things are compared: the size, and the share of pixels
    that differ by more than a per-channel tolerance (48 of 255), which must
    stay under 0.4%. Measured here: the same page rendered again differs by
    0.0%; one trajectory's answer (so its colour) changed, 0.7%; the details
    panel of another trajectory, 0.8%: each real change of what the page
    shows is above the bar, anti-aliasing noise far below it. After a
    deliberate change, rewrite the stored one with ``PACORE_UPDATE_SNAPSHOTS=1``.
    """
    async with open_browser() as browser, browser.page() as page:
        await opened(page, page_file)
        x, y = await page.center_of('.trajectory[data-id="r1.0"]')
        await page.click(x, y)
        png = await page.screenshot()
    (tmp_path / "viewer.png").write_bytes(png)
    print(f"message graph viewer screenshot: {tmp_path / 'viewer.png'}")
    artifacts = os.environ.get("PACORE_ARTIFACTS_DIR")
    if artifacts:  # CI keeps it
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        (Path(artifacts) / "message-graph-viewer.png").write_bytes(png)
    if os.environ.get("PACORE_UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_bytes(png)
        if os.environ.get("PACORE_UPDATE_SNAPSHOTS") != "1":
            pytest.fail(f"no stored screenshot: wrote {SNAPSHOT}; check it and commit it")
    different = pixel_difference(png, SNAPSHOT.read_bytes())
    assert different < MAX_DIFFERENT, f"{different:.1%} of pixels differ; see {tmp_path}"
