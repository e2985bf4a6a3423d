"""A headless Chromium driven over the Chrome DevTools protocol, for tests that open pages.

Why not Playwright: it downloads its own browsers from the network, which
these machines do not have. Debian's ``chromium`` package is enough: it is
started with ``--remote-debugging-port=0``, prints the DevTools address on
stderr, and each page is a WebSocket (aiohttp's client, already a
dependency) taking JSON commands. Only what the tests need is here: open a
URL, evaluate JavaScript, move and click the mouse, collect console errors
and uncaught exceptions, take a screenshot.

``PACORE_REQUIRE_BROWSER=1`` (set by CI) turns "Chromium is not installed"
from a skip into a failure, so CI cannot pass without it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

__all__ = ["Browser", "Page", "chromium_path", "open_browser", "pixel_difference"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def chromium_path() -> str:
    """The Chromium binary; skip (or fail under PACORE_REQUIRE_BROWSER=1) if there is none."""
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    message = "no headless Chromium (Debian: apt-get install chromium)"
    if os.environ.get("PACORE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PACORE_REQUIRE_BROWSER=1 but {message}")
    pytest.skip(message)


@dataclass
class Page:
    """One tab: commands in, results and events out."""

    ws: aiohttp.ClientWebSocketResponse
    errors: list[str] = field(default_factory=list)
    """Console errors and uncaught exceptions, in order."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _waiting: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    _events: dict[str, list[asyncio.Future[dict[str, Any]]]] = field(default_factory=dict)
    _reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data:
                future = self._waiting.pop(data["id"], None)
                if future is not None and not future.done():
                    if "error" in data:
                        future.set_exception(RuntimeError(f"CDP error: {data['error']}"))
                    else:
                        future.set_result(data.get("result", {}))
                continue
            method, params = data.get("method", ""), data.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                self.errors.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.errors.append(str(details.get("exception", {}).get("description", details)))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                self.errors.append(str(params["entry"].get("text")))
            for future in self._events.pop(method, []):
                if not future.done():
                    future.set_result(params)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One command; its result (a CDP error raises)."""
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        await self.ws.send_str(
            json.dumps({"id": call_id, "method": method, "params": params or {}})
        )
        return await asyncio.wait_for(future, 60)

    def event(self, method: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the next ``method`` event (ask before causing it)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._events.setdefault(method, []).append(future)
        return future

    async def goto(self, url: str, *, width: int = 1200, height: int = 800) -> None:
        """Open ``url`` in a ``width`` x ``height`` viewport and wait for its load event."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        loaded = self.event("Page.loadEventFired")
        await self.send("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded, 60)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        out = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in out:
            raise RuntimeError(f"JavaScript failed: {out['exceptionDetails']}")
        return out.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy (a page still rendering); its value."""
        async with asyncio.timeout(timeout):
            while True:
                value = await self.evaluate(expression)
                if value:
                    return value
                await asyncio.sleep(0.2)

    async def center_of(self, selector: str) -> tuple[float, float]:
        """The viewport coordinates of the middle of the first element matching ``selector``."""
        box = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        return float(box[0]), float(box[1])

    async def move(self, x: float, y: float) -> None:
        await self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    async def click(self, x: float, y: float) -> None:
        """A real left click at (x, y): the browser decides which element gets it."""
        await self.move(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    async def screenshot(self, *, full_page: bool = False) -> bytes:
        """The viewport (or the whole page) as PNG bytes."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        out = await self.send("Page.captureScreenshot", params)
        return base64.b64decode(out["data"])


@dataclass
class Browser:
    """A running headless Chromium and its DevTools HTTP address."""

    process: subprocess.Popen[bytes]
    http: str
    session: aiohttp.ClientSession

    @contextlib.asynccontextmanager
    async def page(self) -> AsyncIterator[Page]:
        """A fresh tab with console, log and runtime events on."""
        async with self.session.put(f"{self.http}/json/new?about:blank") as resp:
            target = await resp.json()
        ws = await self.session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        page = Page(ws)
        page.start()
        try:
            for domain in ("Page", "Runtime", "Log"):
                await page.send(f"{domain}.enable")
            yield page
        finally:
            await ws.close()
            if page._reader is not None:
                page._reader.cancel()
            async with self.session.get(f"{self.http}/json/close/{target['id']}"):
                pass


@contextlib.asynccontextmanager
async def open_browser() -> AsyncIterator[Browser]:
    """Start headless Chromium with a throwaway profile; stop it (by its pid) at the end.

    ``--no-sandbox`` because tests may run as root, where Chromium's sandbox
    refuses to start; the pages it opens are the tests' own.
    """
    binary = chromium_path()
    # Chromium's helper processes can still be writing the profile when the main one
    # has exited: a failed clean-up of that throwaway folder is no test's failure.
    with tempfile.TemporaryDirectory(
        prefix="pacore-chromium-", ignore_cleanup_errors=True
    ) as profile:
        process = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--font-render-hinting=none",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            ws_url = await asyncio.wait_for(asyncio.to_thread(_devtools_url, process), 60)
            http = "http://" + ws_url.split("/")[2]
            async with aiohttp.ClientSession() as session:
                yield Browser(process, http, session)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _devtools_url(process: subprocess.Popen[bytes]) -> str:
    """The DevTools address Chromium prints; stderr is then drained by a thread until exit.

    Draining matters: Chromium keeps logging, and a full pipe would block it.
    """
    assert process.stderr is not None
    stream = process.stderr
    seen: list[str] = []
    for raw in stream:
        line = raw.decode("utf-8", "replace")
        seen.append(line)
        found = _LISTENING.search(line)
        if found:
            threading.Thread(target=stream.read, daemon=True).start()
            return found.group(1)
    raise RuntimeError("Chromium exited before DevTools listened: " + "".join(seen[-10:]))


def pixel_difference(png_a: bytes, png_b: bytes, *, tolerance: int = 48) -> float:
    """The share of pixels that differ by more than ``tolerance`` (0-255) in any channel.

    Two renderings of one page differ a little (font hinting, anti-aliasing,
    Chromium versions): a per-pixel tolerance ignores those, and the share of
    pixels still different says whether the picture changed. Images of
    different sizes differ entirely (1.0).
    """
    import io

    from PIL import Image, ImageChops

    a = Image.open(io.BytesIO(png_a)).convert("RGB")
    b = Image.open(io.BytesIO(png_b)).convert("RGB")
    if a.size != b.size:
        return 1.0
    red, green, blue = ImageChops.difference(a, b).split()
    worst = ImageChops.lighter(ImageChops.lighter(red, green), blue)
    histogram = worst.histogram()
    return sum(histogram[tolerance + 1 :]) / float(a.size[0] * a.size[1])
