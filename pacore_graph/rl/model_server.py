"""``pacore model serve DIR``: a trained folder behind an OpenAI-compatible API, on a CPU.

Closing the train-and-eval loop needs the trained weights to answer
``pacore eval`` without a GPU. ``transformers serve`` answers chat
completions offline but ignores ``n``; PaCoRe's explorers send one request
with ``n = K``, so a server that drops ``n`` silently turns a K-wide round
into fewer samples (the client then re-asks one by one). This server is
small and does what the graph needs:

- ``n`` samples per request (``num_return_sequences``), each a real sample:
  ``do_sample`` at the request's ``temperature`` (default 1.0, the paper's)
  and ``top_p``; ``temperature: 0`` is greedy;
- ``max_tokens`` (default 256), ``seed`` (a per-request generator, so a
  seeded request is reproducible), ``stop`` is not supported and refused;
- ``usage`` with exact token counts and ``finish_reason`` ``length`` when a
  sample hit ``max_tokens``.

Requests are served one at a time (generation runs in a worker thread, the
event loop keeps accepting): throughput is the model's, which for a 135M
model on two cores is tens of tokens per second per sample.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from pacore_graph.rl import require_rl

__all__ = ["ModelServer", "serve_command"]

DEFAULT_MAX_TOKENS = 256


def _bad_request(message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return web.json_response(body, status=400)


def _eos_ids(tokenizer: Any, model: Any) -> set[int]:
    configured = model.generation_config.eos_token_id
    ids = configured if isinstance(configured, list) else [configured]
    return {int(i) for i in (tokenizer.eos_token_id, *ids) if i is not None}


@dataclass(slots=True)
class ModelServer:
    """A ``transformers`` causal LM served at ``http://HOST:PORT/v1``."""

    model_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    name: str | None = None
    threads: int | None = 2
    _model: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _runner: web.AppRunner | None = field(default=None, init=False, repr=False)

    @property
    def model_name(self) -> str:
        return self.name or Path(self.model_dir).name

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def load(self) -> None:
        """Load the model and tokenizer (once); a missing folder is a FileNotFoundError."""
        if self._model is not None:
            return
        require_rl("torch", "transformers")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(self.model_dir)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{folder} is not a model folder (no config.json)")
        if self.threads:
            torch.set_num_threads(self.threads)
        self._tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self._model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()

    # ------------------------------------------------------------------ generation

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat-completions request, answered synchronously (holds the model lock)."""
        import torch

        tok, model = self._tokenizer, self._model
        n = int(body.get("n") or 1)
        temperature = float(body.get("temperature", 1.0))
        top_p = float(body.get("top_p", 1.0))
        max_tokens = int(body.get("max_tokens") or DEFAULT_MAX_TOKENS)
        seed = body.get("seed")
        encoded = tok.apply_chat_template(
            body["messages"], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        prompt_len = int(encoded["input_ids"].shape[1])
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "num_return_sequences": n,
            "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        }
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
        else:  # greedy: one sequence, the same for every choice
            kwargs.update(do_sample=False, num_return_sequences=1)
        with self._lock, torch.no_grad():
            if isinstance(seed, int):
                torch.manual_seed(seed)
            out = model.generate(**encoded, **kwargs)
        if out.shape[0] != n:
            out = out.repeat(n, 1)
        choices, completion_tokens = [], 0
        eos = _eos_ids(tok, model)
        for i, row in enumerate(out[:, prompt_len:].tolist()):
            ended = next((j for j, t in enumerate(row) if t in eos), None)
            tokens = row if ended is None else row[:ended]
            completion_tokens += len(tokens) + (0 if ended is None else 1)
            choices.append(
                {
                    "index": i,
                    "message": {
                        "role": "assistant",
                        "content": tok.decode(tokens, skip_special_tokens=True),
                    },
                    "finish_reason": "stop" if ended is not None else "length",
                }
            )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_len,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_len + completion_tokens,
            },
        }

    # ------------------------------------------------------------------ HTTP

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _bad_request("the body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _bad_request("'messages' must be a list of chat messages")
        if body.get("stream"):
            return _bad_request("streaming is not supported by this server")
        if body.get("stop"):
            return _bad_request("'stop' is not supported by this server")
        n = body.get("n") or 1
        if not isinstance(n, int) or not 1 <= n <= 256:
            return _bad_request("'n' must be an integer in [1, 256]")
        try:
            answer = await asyncio.to_thread(self.generate, body)
        except (ValueError, TypeError, KeyError) as exc:
            return _bad_request(f"{type(exc).__name__}: {exc}")
        return web.json_response(answer)

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": self.model_name, "object": "model", "owned_by": "pacore"}]
        return web.json_response({"object": "list", "data": data})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        return app

    async def start(self) -> ModelServer:
        self.load()
        runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self.port = int(runner.addresses[0][1])
        self._runner = runner
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @contextmanager
    def run_in_thread(self) -> Iterator[ModelServer]:
        """Serve from a daemon thread with its own event loop (for sync code and examples)."""
        self.load()
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        errors: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        thread = threading.Thread(target=serve, name="pacore-model-server", daemon=True)
        thread.start()
        ready.wait(60)
        if errors:
            raise errors[0]
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)


def serve_command(
    model_dir: Path, *, host: str = "127.0.0.1", port: int = 8000, name: str | None = None
) -> int:
    """``pacore model serve DIR [--port P]``: serve until interrupted (Ctrl-C)."""
    server = ModelServer(model_dir, host=host, port=port, name=name)

    async def main() -> None:
        await server.start()
        print(
            json.dumps({"ready": server.base_url, "model": server.model_name}),
            flush=True,
        )
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    with suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0
