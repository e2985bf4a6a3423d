"""Continuous batching over llama.cpp: every running sequence advances in one decode per step.

PaCoRe's rounds are K samples of one prompt. A server that decodes one
request at a time makes the K explorers queue behind each other; decoding
them together costs little more than one (a 135M model on a CPU is
memory-bound: the weights are read once per step whatever the batch). This
module is the scheduler in its simplest form:

- a request of ``n`` samples has its prompt decoded once, in the first of
  its ``n`` sequences; the KV cells are then shared with the others
  (``memory_seq_cp`` on a unified KV cache) and each sequence samples with
  its own sampler, seeded ``seed + i`` (:func:`pacore_graph.values.seeds.sample_seed`);
- new requests join the running batch at the next step (continuous
  batching): nobody is interrupted and nobody waits for a whole request to
  finish, only for a free sequence slot and KV room;
- admission reserves the KV cells a request can ever use (its prompt plus
  ``n`` times its token cap), so a decode never runs out of cache halfway;
  a request larger than the whole cache is refused up front
  (:class:`RequestTooLarge`), one that merely has to wait is queued (FIFO);
- one engine thread owns the llama.cpp context; callers talk to it through a
  lock-protected queue and receive events through a callback, so the HTTP
  event loop never runs model code (llama.cpp releases the GIL while it
  decodes);
- a request that asks for log-probabilities (``SamplingSpec.top_logprobs``)
  has each row of logits it samples from read and log-softmaxed *before*
  its samplers run (:mod:`pacore_graph.embedded.token_logprobs`); the others
  never touch the logits from Python, so they pay nothing for it.

The engine is the ``cyllama`` package (manylinux wheels of llama.cpp); see
``docs/embedded.md`` for why.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pacore_graph.embedded.token_logprobs import MAX_TOP_LOGPROBS, LogitRow, TokenLogprob
from pacore_graph.errors import PaCoReError
from pacore_graph.values.seeds import sample_seed

__all__ = [
    "BatchEngine",
    "ChoiceEvent",
    "EngineFailure",
    "EngineStats",
    "GenerationHandle",
    "RequestTooLarge",
    "SamplingSpec",
]

#: A detokenized piece that ends in U+FFFD is an incomplete UTF-8 sequence;
#: wait for at most this many more tokens before emitting it as it is.
_MAX_PENDING_TOKENS: Final = 4

#: llama.cpp's token attributes that ``parse_special`` matches in text (and
#: plain tokenizing never does): ``LLAMA_TOKEN_ATTR_UNKNOWN`` and ``_CONTROL``.
_SPECIAL_PARSED_ATTRS: Final = 1 | 8
#: ``LLAMA_TOKEN_ATTR_RSTRIP``: the token eats the whitespace after it.
_RSTRIP_ATTR: Final = 256


class RequestTooLarge(PaCoReError):
    """The request can never fit: more sequences or KV cells than the engine has."""


@dataclass(frozen=True, slots=True)
class SamplingSpec:
    """How the sequences of one request are sampled (validated by the HTTP layer)."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    #: ``None``: no log-probabilities (the default, free). ``k`` (0-20): every
    #: sampled token's log-probability and its ``k`` most likely alternatives.
    top_logprobs: int | None = None


@dataclass(frozen=True, slots=True)
class ChoiceEvent:
    """New text of one choice: ``finish_reason`` is set on its last event.

    ``logprobs`` has one entry per id of ``token_ids`` when the request asked
    for them (``SamplingSpec.top_logprobs``), else ``None``.
    """

    index: int
    text: str
    token_ids: tuple[int, ...]
    completion_tokens: int
    finish_reason: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """The engine could not go on with this request (a decode failed); its sequences are gone."""

    message: str


Sink = Callable[[Sequence[ChoiceEvent] | EngineFailure], None]


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Counters of an engine since it started (read by ``GET /stats`` and the tests)."""

    max_sequences: int
    kv_tokens: int
    active_sequences: int
    waiting_requests: int
    kv_reserved: int
    started_sequences: int
    finished_sequences: int
    cancelled_sequences: int
    decode_steps: int
    most_sequences_in_one_step: int
    generated_tokens: int
    failed_requests: int

    def as_dict(self) -> dict[str, int]:
        """Plain JSON-ready form."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(eq=False, slots=True)
class _Sequence:
    index: int
    slot: int
    sampler: Any
    max_new: int
    stop: tuple[str, ...]
    pos: int = 0
    logits_at: int = -1
    next_token: int | None = None
    generated: int = 0
    text: str = ""
    emitted: int = 0
    pending: list[int] = field(default_factory=list)
    new_ids: list[int] = field(default_factory=list)
    finish: str | None = None
    top_logprobs: int | None = None
    new_logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Request:
    prompt: list[int]
    n: int
    spec: SamplingSpec
    sink: Sink
    reserve: int
    sequences: list[_Sequence] = field(default_factory=list)
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return all(s.finish is not None for s in self.sequences)


class GenerationHandle:
    """What :meth:`BatchEngine.submit` returns: cancel the request (idempotent, any thread)."""

    __slots__ = ("_engine", "_request")

    def __init__(self, engine: BatchEngine, request: _Request) -> None:
        self._engine = engine
        self._request = request

    def cancel(self) -> None:
        """Drop the request's sequences at the next step and free their slots and KV cells."""
        self._engine._cancel(self._request)


def _load_llama() -> Any:
    """The llama.cpp bindings (imported lazily: importing them loads the shared libraries)."""
    from cyllama.llama import llama_cpp

    return llama_cpp


def _load_model(llama: Any, path: Path, params: Any) -> Any:
    """The model, as an object ``LlamaContext.get_logits_ith`` can read.

    cyllama 0.2.18's ``get_logits_ith`` (and ``get_logits``) read
    ``self.model.n_vocab``, which its ``LlamaModel`` does not have (an
    ``AttributeError`` on every call; 0.4.0 asks the vocabulary instead). A
    Python subclass carrying the attribute makes them work; nothing else
    of the model changes.
    """

    class _Model(llama.LlamaModel):
        n_vocab: int

    model = _Model(str(path), params)
    model.n_vocab = int(model.get_vocab().n_vocab)
    return model


class BatchEngine:
    """One llama.cpp model and context, decoding all running sequences together.

    Args:
        model_path: the GGUF file.
        n_ctx: the longest sequence, prompt plus completion, in tokens.
        max_sequences: sequences decoded at once; also the largest ``n``.
        kv_tokens: KV cache cells shared by all sequences (a prompt shared by
            the ``n`` sequences of a request counts once).
        n_threads: llama.cpp threads.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 2048,
        max_sequences: int = 16,
        kv_tokens: int = 16384,
        n_threads: int = 2,
    ) -> None:
        if n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16, got {n_ctx}")
        if max_sequences < 1:
            raise ValueError(f"max_sequences must be positive, got {max_sequences}")
        if kv_tokens < n_ctx:
            raise ValueError(f"kv_tokens ({kv_tokens}) must be at least n_ctx ({n_ctx})")
        self.n_ctx = n_ctx
        self.max_sequences = max_sequences
        self.kv_tokens = kv_tokens
        llama = _load_llama()
        self._llama = llama
        llama.disable_logging()
        llama.ggml_backend_load_all()
        model_params = llama.LlamaModelParams()
        model_params.n_gpu_layers = 0
        self._model = _load_model(llama, model_path, model_params)
        self.vocab = self._model.get_vocab()
        self.max_token_bytes, self.control_texts, self.boundary_texts = self._scan_vocab()
        self._n_batch = n_ctx + max_sequences
        ctx_params = llama.LlamaContextParams()
        ctx_params.n_ctx = kv_tokens
        ctx_params.n_batch = self._n_batch
        ctx_params.n_seq_max = max_sequences
        ctx_params.kv_unified = True  # one pool of cells: a shared prompt is stored once
        ctx_params.n_threads = n_threads
        ctx_params.n_threads_batch = n_threads
        self._ctx = llama.LlamaContext(self._model, ctx_params)
        self._batch = llama.LlamaBatch(n_tokens=self._n_batch, embd=0, n_seq_max=1)
        self._lock = threading.Condition()
        self._waiting: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._free_slots = list(range(max_sequences - 1, -1, -1))
        self._kv_reserved = 0
        self._closed = False
        self._counters = dict.fromkeys(
            (
                "started_sequences",
                "finished_sequences",
                "cancelled_sequences",
                "decode_steps",
                "most_sequences_in_one_step",
                "generated_tokens",
                "failed_requests",
            ),
            0,
        )
        self._thread = threading.Thread(
            target=self._loop, name="pacore-embedded-engine", daemon=True
        )
        self._thread.start()

    # -- the model ------------------------------------------------------------

    @property
    def chat_template(self) -> str:
        """The GGUF's own chat template (``tokenizer.chat_template``), or "" if it has none."""
        return str(self._model.get_default_chat_template() or "")

    def token_text(self, token: int) -> str:
        """The text of one special token (``bos_token``/``eos_token`` for templates)."""
        return str(self.vocab.token_to_piece(token, special=True))

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text``; ``special``: control-token text such as ``<|im_start|>`` is
        the control token (a chat template's own markers), else it is plain text (a
        message's). Safe from any thread: llama.cpp releases the GIL while it tokenizes.
        """
        return list(self.vocab.tokenize(text, add_special=False, parse_special=special))

    def _scan_vocab(self) -> tuple[int, frozenset[str], frozenset[str]]:
        """The longest token in UTF-8 bytes; the texts ``parse_special`` turns into tokens;
        those of them after which text may be cut (the token eats no whitespace after it).

        Why: no text of ``b`` bytes tokenizes into fewer than ``b / max_token_bytes``
        tokens, so a prompt too long for the context is refused from its length alone;
        a message spelling a control token is found by a substring search; and a prompt
        is tokenized in pieces cut after control tokens, as llama.cpp cuts it anyway
        (its special-token pass is superlinear in one piece's markers). One pass over
        the vocabulary (~50 ms for SmolLM2's 49,152 tokens).
        """
        longest = 1
        control: set[str] = set()
        boundaries: set[str] = set()
        for token in range(int(self.vocab.n_vocab)):
            piece = str(self.vocab.token_to_piece(token, special=True))
            # A piece that is part of a character reads as U+FFFD (3 bytes for 1-3): an
            # over-estimate, so the bound stays safe.
            longest = max(longest, len(piece.encode("utf-8", "surrogatepass")))
            attr = int(self.vocab.get_attr(token))
            if piece and attr & _SPECIAL_PARSED_ATTRS:
                control.add(piece)
                if not attr & _RSTRIP_ATTR:
                    boundaries.add(piece)
        return longest, frozenset(control), frozenset(boundaries)

    # -- requests -------------------------------------------------------------

    def reserve_for(self, prompt_tokens: int, n: int, max_new_tokens: int) -> int:
        """KV cells a request may use: its prompt once, plus ``n`` completions."""
        return prompt_tokens + n * max_new_tokens

    def submit(
        self, prompt: Sequence[int], n: int, spec: SamplingSpec, sink: Sink
    ) -> GenerationHandle:
        """Queue a request; ``sink`` gets its events from the engine thread (keep it cheap).

        Raises :class:`RequestTooLarge` if it can never be admitted, and
        ``ValueError`` for a ``top_logprobs`` outside 0-20 (caught here: on the
        engine thread it would fail every request of the step).
        """
        k = spec.top_logprobs
        if k is not None and not 0 <= k <= MAX_TOP_LOGPROBS:
            raise ValueError(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {k}")
        if not prompt:
            raise RequestTooLarge("the prompt is empty")
        if not 1 <= n <= self.max_sequences:
            raise RequestTooLarge(f"n must be between 1 and {self.max_sequences}, got {n}")
        if len(prompt) + spec.max_new_tokens > self.n_ctx:
            raise RequestTooLarge(
                f"{len(prompt)} prompt tokens plus {spec.max_new_tokens} completion tokens "
                f"exceed the context of {self.n_ctx} tokens"
            )
        reserve = self.reserve_for(len(prompt), n, spec.max_new_tokens)
        if reserve > self.kv_tokens:
            raise RequestTooLarge(
                f"{n} samples of up to {spec.max_new_tokens} tokens after a "
                f"{len(prompt)}-token prompt need {reserve} KV cells; the server has "
                f"{self.kv_tokens} (lower n or max_tokens)"
            )
        request = _Request(prompt=list(prompt), n=n, spec=spec, sink=sink, reserve=reserve)
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine is closed")
            self._waiting.append(request)
            self._lock.notify()
        return GenerationHandle(self, request)

    def stats(self) -> EngineStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return EngineStats(
                max_sequences=self.max_sequences,
                kv_tokens=self.kv_tokens,
                active_sequences=sum(
                    1 for r in self._running for s in r.sequences if s.finish is None
                ),
                waiting_requests=len(self._waiting),
                kv_reserved=self._kv_reserved,
                **self._counters,
            )

    def close(self) -> None:
        """Stop the engine thread (pending requests get no more events); idempotent."""
        with self._lock:
            self._closed = True
            self._lock.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30.0)

    def _cancel(self, request: _Request) -> None:
        with self._lock:
            if request.cancelled or (request.sequences and request.done):
                return
            request.cancelled = True
            if request in self._waiting:
                self._waiting.remove(request)
            self._lock.notify()

    # -- the engine thread ----------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._running and not self._waiting:
                    self._lock.wait()
                if self._closed:
                    return
            try:
                with self._lock:
                    self._drop_cancelled()
                    admitted = self._admit()
                if self._running:
                    self._step(admitted)
            except Exception as exc:  # a failed step ends the requests in it, not the server
                self._fail_running(f"the embedded engine failed: {exc}")

    def _drop_cancelled(self) -> None:
        """(lock held) Finish the sequences of cancelled requests and free what they held."""
        for request in [r for r in self._running if r.cancelled]:
            for seq in request.sequences:
                if seq.finish is None:
                    seq.finish = "cancelled"
                    self._counters["cancelled_sequences"] += 1
                    self._release(request, seq)
            self._retire(request)

    def _admit(self) -> list[_Request]:
        """(lock held) Move waiting requests into the batch while slots, KV and batch room last."""
        admitted: list[_Request] = []
        batch_room = self._n_batch - sum(len(r.sequences) for r in self._running)
        while self._waiting:
            request = self._waiting[0]
            if (
                request.n > len(self._free_slots)
                or self._kv_reserved + request.reserve > self.kv_tokens
                or len(request.prompt) > batch_room
            ):
                break  # FIFO: later requests wait behind it
            self._waiting.popleft()
            batch_room -= len(request.prompt)
            self._kv_reserved += request.reserve
            for i in range(request.n):
                request.sequences.append(self._new_sequence(request, i))
            self._counters["started_sequences"] += request.n
            self._running.append(request)
            admitted.append(request)
        return admitted

    def _new_sequence(self, request: _Request, index: int) -> _Sequence:
        spec = request.spec
        sampler = self._llama.LlamaSampler(self._llama.LlamaSamplerChainParams())
        if spec.frequency_penalty or spec.presence_penalty:
            sampler.add_penalties(64, 1.0, spec.frequency_penalty, spec.presence_penalty)
        if spec.temperature <= 0.0:
            sampler.add_greedy()
        else:
            # vLLM's and OpenAI's order: temperature first, then nucleus on the scaled logits.
            sampler.add_temp(spec.temperature)
            if spec.top_p < 1.0:
                sampler.add_top_p(spec.top_p, 1)
            seed = sample_seed(spec.seed, index)
            if seed is None:
                seed = int.from_bytes(os.urandom(4), "little")
            sampler.add_dist(seed & 0xFFFFFFFF)
        return _Sequence(
            index=index,
            slot=self._free_slots.pop(),
            sampler=sampler,
            max_new=spec.max_new_tokens,
            stop=spec.stop,
            pos=len(request.prompt),
            top_logprobs=spec.top_logprobs,
        )

    def _step(self, admitted: list[_Request]) -> None:
        """One decode of every running sequence's next token and every admitted prompt."""
        batch = self._batch
        batch.clear()
        feeding: list[_Sequence] = []
        for request in self._running:
            for seq in request.sequences:
                if seq.finish is None and seq.next_token is not None:
                    seq.logits_at = batch.n_tokens
                    batch.add(seq.next_token, seq.pos, [seq.slot], True)
                    seq.pos += 1
                    seq.next_token = None
                    feeding.append(seq)
        prompt_ends: list[tuple[_Request, int]] = []
        for request in admitted:
            slot = request.sequences[0].slot
            last = len(request.prompt) - 1
            for i, token in enumerate(request.prompt):
                batch.add(token, i, [slot], i == last)
            prompt_ends.append((request, batch.n_tokens - 1))
        if batch.n_tokens == 0:
            return
        self._ctx.decode(batch)
        for request, at in prompt_ends:
            head = request.sequences[0]
            for seq in request.sequences:
                seq.logits_at = at
                if seq is not head:
                    self._ctx.memory_seq_cp(head.slot, seq.slot, -1, -1)
        stepping = len(feeding) + sum(r.n for r in admitted)
        with self._lock:
            self._counters["decode_steps"] += 1
            self._counters["most_sequences_in_one_step"] = max(
                self._counters["most_sequences_in_one_step"], stepping
            )
        self._sample_all()

    def _sample_all(self) -> None:
        """Sample one token for every sequence that has fresh logits; send the events."""
        for request in list(self._running):
            if request.cancelled:
                continue
            events: list[ChoiceEvent] = []
            rows: dict[int, LogitRow] = {}  # the request's sequences share their prompt's row
            for seq in request.sequences:
                if seq.finish is not None or seq.logits_at < 0:
                    continue
                row = None
                if seq.top_logprobs is not None:
                    # Read before the sampler runs: the row is the model's, not the sampler's.
                    row = rows.get(seq.logits_at)
                    if row is None:
                        logits = self._ctx.get_logits_ith(seq.logits_at)
                        row = rows[seq.logits_at] = LogitRow(logits, seq.top_logprobs)
                token = int(seq.sampler.sample(self._ctx, seq.logits_at))
                seq.logits_at = -1
                event = self._advance(seq, token, None if row is None else row.entry(token))
                if event is not None:
                    events.append(event)
            if events:
                with self._lock:
                    self._counters["generated_tokens"] += sum(len(e.token_ids) for e in events)
                    for event in events:
                        if event.finish_reason is not None:
                            self._counters["finished_sequences"] += 1
                            self._release(request, request.sequences[event.index])
                    if request.done:
                        self._retire(request)  # before the last event: stats are settled
                request.sink(events)

    def _advance(
        self, seq: _Sequence, token: int, logprob: TokenLogprob | None = None
    ) -> ChoiceEvent | None:
        """Take the sampled token into the sequence; the event to send, if any.

        An end-of-generation token is not part of the completion (no id, no
        count, no log-probability), as it is not in the text.
        """
        if self.vocab.is_eog(token):
            return self._finish(seq, "stop", flush=True)
        seq.generated += 1
        seq.new_ids.append(token)
        if logprob is not None:
            seq.new_logprobs.append(logprob)
        seq.pending.append(token)
        piece = self._text_of(seq.pending)
        if not piece.endswith("\ufffd") or len(seq.pending) >= _MAX_PENDING_TOKENS:
            seq.text += piece
            seq.pending.clear()
        if seq.stop:
            cut = self._stop_at(seq)
            if cut is not None:
                seq.text = seq.text[:cut]
                return self._finish(seq, "stop", flush=False)
        if seq.generated >= seq.max_new or seq.pos + 1 >= self.n_ctx:
            return self._finish(seq, "length", flush=True)
        seq.next_token = token
        safe = len(seq.text) - self._held_back(seq)
        if safe <= seq.emitted:
            return None
        return self._emit(seq, safe, None)

    def _text_of(self, tokens: list[int]) -> str:
        """The text of consecutive tokens, bytes of one character split across them joined.

        ``token_to_piece`` keeps each token's leading space but cannot join a
        character split over two tokens; ``detokenize`` joins it but drops
        the first token's leading space, which is put back.
        """
        pieces = [str(self.vocab.token_to_piece(t, special=False)) for t in tokens]
        if not any("\ufffd" in p for p in pieces):
            return "".join(pieces)
        text = str(self.vocab.detokenize(tokens, False, False))
        lost = (len(pieces[0]) - len(pieces[0].lstrip(" "))) - (len(text) - len(text.lstrip(" ")))
        return " " * max(0, lost) + text

    def _finish(self, seq: _Sequence, reason: str, *, flush: bool) -> ChoiceEvent:
        if flush and seq.pending:
            seq.text += self._text_of(seq.pending)
            seq.pending.clear()
        seq.finish = reason
        return self._emit(seq, len(seq.text), reason)

    def _emit(self, seq: _Sequence, upto: int, reason: str | None) -> ChoiceEvent:
        text = seq.text[seq.emitted : upto]
        seq.emitted = max(seq.emitted, upto)
        ids, seq.new_ids = tuple(seq.new_ids), []
        logprobs = None
        if seq.top_logprobs is not None:
            logprobs, seq.new_logprobs = tuple(seq.new_logprobs), []
        return ChoiceEvent(seq.index, text, ids, seq.generated, reason, logprobs)

    @staticmethod
    def _stop_at(seq: _Sequence) -> int | None:
        """Where the first stop string starts in the text, if one is complete now."""
        longest = max(map(len, seq.stop))
        start = max(0, seq.emitted - longest)
        hits = [i for i in (seq.text.find(s, start) for s in seq.stop) if i >= 0]
        return min(hits) if hits else None

    @staticmethod
    def _held_back(seq: _Sequence) -> int:
        """Characters at the end that could be the start of a stop string (not sent yet)."""
        held = 0
        for stop in seq.stop:
            for k in range(min(len(stop) - 1, len(seq.text)), held, -1):
                if seq.text.endswith(stop[:k]):
                    held = k
                    break
        return held

    def _release(self, request: _Request, seq: _Sequence) -> None:
        """(lock held) Give a finished sequence's slot, cells and reservation back."""
        self._ctx.memory_seq_rm(seq.slot, -1, -1)
        self._free_slots.append(seq.slot)
        self._kv_reserved -= seq.max_new
        request.reserve -= seq.max_new

    def _retire(self, request: _Request) -> None:
        """(lock held) A request whose sequences all ended leaves the batch with its prompt."""
        if request in self._running:
            self._running.remove(request)
            self._kv_reserved -= request.reserve
            request.reserve = 0

    def _fail_running(self, message: str) -> None:
        with self._lock:
            failed = list(self._running)
            for request in failed:
                for seq in request.sequences:
                    if seq.finish is None:
                        seq.finish = "error"
                        self._release(request, seq)
                self._retire(request)
            self._counters["failed_requests"] += len(failed)
        for request in failed:
            request.sink(EngineFailure(message))
