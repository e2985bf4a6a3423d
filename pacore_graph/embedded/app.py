"""The embedded server's HTTP side: OpenAI chat completions over a :class:`BatchEngine`.

aiohttp (already a core dependency) serves ``/v1/models``,
``/v1/chat/completions`` (JSON or server-sent events), ``/health`` and
``/stats`` (the engine's counters). Each request is checked
(:mod:`pacore_graph.embedded.protocol`), rendered with the model's chat
template, tokenized and handed to the engine; the engine's events come back
through ``call_soon_threadsafe`` into a queue per request. A client that
disconnects cancels its request (aiohttp cancels the handler), which frees
its sequences at the engine's next step. Token log-probabilities, when
asked, come from the engine as ids and numbers and are written here in
OpenAI's ``logprobs.content`` format (:mod:`pacore_graph.embedded.token_logprobs`),
whole in the JSON answer and per delta in the stream.

Nothing a request asks for runs long on the event loop (issue 31: one
request froze ``/health`` and every other client for 47-100 s). The body is
capped in bytes (:func:`max_body_bytes`: what the context could hold, every
character JSON-escaped; 413 beyond), and everything between the bytes and
the engine -- JSON decoding, validation, the chat template, the length
bounds and the tokenizer (:mod:`pacore_graph.embedded.prompt`) -- runs in a
worker thread; llama.cpp's tokenizer releases the GIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from pacore_graph.embedded.chat_template import ChatTemplate, ChatTemplateError
from pacore_graph.embedded.engine import (
    BatchEngine,
    ChoiceEvent,
    EngineFailure,
    RequestTooLarge,
    SamplingSpec,
)
from pacore_graph.embedded.prompt import PromptTokenizer
from pacore_graph.embedded.protocol import ChatRequest, RequestError, parse_request
from pacore_graph.embedded.token_logprobs import TokenPieces, content_entries

__all__ = ["EmbeddedApp", "build_app", "max_body_bytes"]

#: Room in a request body for everything but the messages' text (fields, JSON syntax).
_BODY_OVERHEAD_BYTES = 64 * 1024
#: The most JSON bytes one byte of text can take (``\u0001``).
_JSON_ESCAPE_BYTES = 6


def max_body_bytes(n_ctx: int, max_token_bytes: int) -> int:
    """The largest request body worth reading: the longest text the context can hold, escaped."""
    return _BODY_OVERHEAD_BYTES + _JSON_ESCAPE_BYTES * n_ctx * max_token_bytes


_Item = Sequence[ChoiceEvent] | EngineFailure


def _bad_request(error: RequestError, status: int = 400) -> web.Response:
    return web.json_response(error.body(), status=status)


def _server_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    finish: str | None = None


@dataclass
class EmbeddedApp:
    """The request handlers, bound to one engine, template and model name."""

    engine: BatchEngine
    prompts: PromptTokenizer
    model_name: str
    pieces: TokenPieces

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v1/models", self.models),
            web.get("/health", self.health),
            web.get("/stats", self.stats),
            web.post("/v1/chat/completions", self.chat),
        ]

    async def models(self, _: web.Request) -> web.Response:
        model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "pacore-graph"}
        return web.json_response({"object": "list", "data": [model]})

    async def health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def stats(self, _: web.Request) -> web.Response:
        return web.json_response(self.engine.stats().as_dict())

    async def chat(self, http: web.Request) -> web.StreamResponse:
        try:
            raw = await http.read()
        except web.HTTPRequestEntityTooLarge:
            cap = http.client_max_size
            error = RequestError(f"the request body is larger than this server's {cap} bytes")
            return _bad_request(error, status=413)
        try:
            # Off the loop: bounded, but the tokenizer may still take a while on a long prompt.
            request, prompt, spec = await asyncio.to_thread(self._prepare, raw)
        except RequestError as exc:
            return _bad_request(exc)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()

        def sink(item: _Item) -> None:  # called on the engine thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, item)

        try:
            handle = self.engine.submit(prompt, request.n, spec, sink)
        except RequestTooLarge as exc:
            return _bad_request(RequestError(str(exc), param="n", code="context_length_exceeded"))
        try:
            if request.stream:
                return await self._stream(http, request, len(prompt), queue)
            return await self._complete(request, len(prompt), queue)
        finally:
            handle.cancel()  # a no-op once finished; frees the sequences of a gone client

    # -- request to engine input ----------------------------------------------

    def _prepare(self, raw: bytes) -> tuple[ChatRequest, list[int], SamplingSpec]:
        """(worker thread) The body decoded, checked, rendered and tokenized; or RequestError."""
        try:
            body = json.loads(raw)
        except RecursionError:
            raise RequestError("the request body is nested too deeply") from None
        except (ValueError, UnicodeDecodeError):
            raise RequestError("the request body is not valid JSON") from None
        request = parse_request(
            body, max_n=self.engine.max_sequences, max_messages=self.engine.n_ctx
        )
        messages = [m.for_template() for m in request.messages]
        try:
            prompt = self.prompts.tokens(messages, completion=request.token_cap() or 1)
        except ChatTemplateError as exc:
            raise RequestError(str(exc), param="messages") from None
        return request, prompt, self._spec(request, len(prompt))

    def _spec(self, request: ChatRequest, prompt_tokens: int) -> SamplingSpec:
        n_ctx = self.engine.n_ctx
        cap = request.token_cap()
        if prompt_tokens + (cap or 1) > n_ctx:
            raise RequestError(
                f"This model's maximum context length is {n_ctx} tokens. However, you "
                f"requested {prompt_tokens + (cap or 1)} tokens ({prompt_tokens} in the "
                f"messages, {cap or 1} in the completion). Please reduce the length of the "
                "messages or completion.",
                param="messages",
                code="context_length_exceeded",
            )
        return SamplingSpec(
            max_new_tokens=cap if cap is not None else n_ctx - prompt_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            seed=request.seed,
            stop=request.stop_strings(),
            frequency_penalty=request.frequency_penalty,
            presence_penalty=request.presence_penalty,
            top_logprobs=request.logprob_alternatives(),
        )

    # -- engine output to HTTP ------------------------------------------------

    def _head(self) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": self.model_name,
        }

    @staticmethod
    def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    async def _complete(
        self, request: ChatRequest, prompt_tokens: int, queue: asyncio.Queue[_Item]
    ) -> web.Response:
        choices = [_Choice() for _ in range(request.n)]
        while any(c.finish is None for c in choices):
            item = await queue.get()
            if isinstance(item, EngineFailure):
                return web.json_response(_server_error(item.message), status=500)
            for event in item:
                choice = choices[event.index]
                choice.text.append(event.text)
                choice.token_ids.extend(event.token_ids)
                if event.logprobs is not None:
                    choice.logprobs.extend(content_entries(event.logprobs, self.pieces))
                choice.tokens = event.completion_tokens
                choice.finish = event.finish_reason
        out = []
        for index, choice in enumerate(choices):
            entry: dict[str, Any] = {
                "index": index,
                "message": {"role": "assistant", "content": "".join(choice.text)},
                "finish_reason": choice.finish,
                "logprobs": {"content": choice.logprobs} if request.logprobs else None,
            }
            if request.return_token_ids:
                entry["token_ids"] = choice.token_ids
            out.append(entry)
        completion = sum(c.tokens for c in choices)
        body = {
            **self._head(),
            "object": "chat.completion",
            "choices": out,
            "usage": self._usage(prompt_tokens, completion),
        }
        return web.json_response(body)

    async def _stream(
        self,
        http: web.Request,
        request: ChatRequest,
        prompt_tokens: int,
        queue: asyncio.Queue[_Item],
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(http)
        head = {**self._head(), "object": "chat.completion.chunk"}
        options = request.stream_options
        continuous = options is not None and options.continuous_usage_stats

        async def send(payload: dict[str, Any]) -> None:
            await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")

        for index in range(request.n):
            delta = {"role": "assistant", "content": ""}
            await send({**head, "choices": [{"index": index, "delta": delta}]})
        tokens = [0] * request.n
        open_choices = set(range(request.n))
        while open_choices:
            item = await queue.get()
            if isinstance(item, EngineFailure):
                await send(_server_error(item.message))
                return response
            for event in item:
                tokens[event.index] = event.completion_tokens
                choice: dict[str, Any] = {
                    "index": event.index,
                    "delta": {"content": event.text},
                    "finish_reason": event.finish_reason,
                }
                if event.logprobs is not None:
                    choice["logprobs"] = {"content": content_entries(event.logprobs, self.pieces)}
                if request.return_token_ids:
                    choice["token_ids"] = list(event.token_ids)
                chunk = {**head, "choices": [choice]}
                if continuous:
                    chunk["usage"] = self._usage(prompt_tokens, event.completion_tokens)
                await send(chunk)
                if event.finish_reason is not None:
                    open_choices.discard(event.index)
        if options is not None and options.include_usage:
            await send({**head, "choices": [], "usage": self._usage(prompt_tokens, sum(tokens))})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def build_app(engine: BatchEngine, model_name: str) -> web.Application:
    """The aiohttp application of the embedded server over ``engine``."""
    template = ChatTemplate(
        engine.chat_template,
        bos_token=engine.token_text(engine.vocab.token_bos()),
        eos_token=engine.token_text(engine.vocab.token_eos()),
    )
    prompts = PromptTokenizer(template, engine, engine.n_ctx)
    app = web.Application(client_max_size=max_body_bytes(engine.n_ctx, engine.max_token_bytes))
    app.add_routes(EmbeddedApp(engine, prompts, model_name, TokenPieces(engine.vocab)).routes())
    return app
