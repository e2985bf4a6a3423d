"""The ``pacore`` command.

``pacore run "QUESTION"`` answers one question; ``pacore run --input F --output
G`` runs a dataset. With no ``--base-url`` it starts the embedded model (a
llama.cpp server on loopback serving SmolLM2-135M-Instruct), runs, and stops
it.

Exit codes (the same for every command, stated in ``pacore --help``):

- 0: done;
- 1: a run failed (or a problem of a dataset failed);
- 2: bad arguments or unusable input (nothing was run);
- 3: done, but some input lines were skipped (each reported on stderr with
  its line number); 1 wins when problems also failed.

Every error is one line on stderr (``pacore: error: ...``), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacore_graph.errors import PaCoReError
from pacore_graph.filenames import EVAL_CHECKPOINT_FILE, RUN_CHECKPOINT_SUFFIX
from pacore_graph.options import (
    EMBEDDED_MAX_CONCURRENCY,
    EMBEDDED_MAX_TOKENS,
    MODEL_OPTIONS,
    SAMPLING_OPTION_NAMES,
    TEXT_GRAPH_ONLY,
    add_options,
)

# Heavy modules (LangGraph, pydantic, aiohttp) are imported inside the
# subcommand that needs them: ``pacore --help`` should not pay a second for
# LangGraph, and ``pacore run`` should reach its first request sooner.
if TYPE_CHECKING:
    from pydantic import ValidationError

    from pacore_graph.client import ChatClient
    from pacore_graph.config import PaCoReConfig
    from pacore_graph.env_settings import PaCoReSettings
    from pacore_graph.records import PaCoReResult
    from pacore_graph.tracing import TraceOptions

__all__ = [
    "EMBEDDED_MAX_CONCURRENCY",
    "EMBEDDED_MAX_TOKENS",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SKIPPED_INPUT",
    "EXIT_USAGE",
    "build_parser",
    "main",
]


#: Exit statuses (documented in the module docstring, ``--help`` and the README).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SKIPPED_INPUT = 3

_EPILOG = (
    "exit status: 0 done; 1 a run (or a dataset problem) failed; 2 bad arguments or "
    "unusable input, nothing run; 3 done, but some input lines were skipped "
    "(each reported on stderr with its line number)."
)


_GRADER_HELP = (
    "math | exact | numeric | choice | module:function (default: by each problem's category)"
)


class UsageError(Exception):
    """Bad arguments or input: exit code 2."""


def _check_base_url(url: str) -> None:
    """A base URL the clients can use, or a one-line reason why not."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"--base-url {url!r}: {exc}") from None
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--base-url must be an http(s) URL such as http://host:8000/v1; got {url!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "--base-url must not carry credentials (user:pass@); "
            "give the key with --api-key or PACORE_API_KEY"
        )


def _check_base_urls(urls: Sequence[str] | None) -> None:
    for url in urls or ():
        _check_base_url(url)


def _readable_file(path: Path, flag: str) -> None:
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{flag} {path}: not readable")


def _writable_file(path: Path, flag: str) -> None:
    """Refuse, before any model call, an output file that could not be written."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {path}: not writable")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create a file in {parent}")


def _utf8_text(text: str, what: str) -> str:
    """Refuse text holding undecodable bytes (read with surrogateescape) before it is sent."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{what} is not valid UTF-8 (undecodable byte at character {exc.start + 1})"
        ) from None
    return text


def _quorum(text: str) -> float | int:
    from pacore_graph.quorum import parse_quorum

    try:
        return parse_quorum(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_round_control_args(p: argparse.ArgumentParser) -> None:
    """Straggler control, early stop and the token budget: all off unless asked."""
    p.add_argument(
        "--round-quorum",
        type=_quorum,
        metavar="Q",
        help="close a round once Q explorers finished: a share of K (0.75) or a count (24); "
        "the rest are cancelled and recorded as dropped (one request per explorer) "
        "(default: none, every explorer finishes)",
    )
    p.add_argument(
        "--round-deadline",
        type=float,
        metavar="S",
        help="close a round S seconds after it started (once one explorer finished); "
        "the rest are cancelled and recorded as dropped (default: none)",
    )
    p.add_argument(
        "--early-stop-consensus",
        type=float,
        metavar="F",
        help="end the run after a round whose answers agree at share >= F (0 < F <= 1) "
        "(default: none, every round runs)",
    )
    p.add_argument(
        "--token-budget",
        type=int,
        metavar="N",
        help="completion tokens per problem: later rounds shrink K to fit (never below 1) "
        "(default: none, no budget)",
    )


def _add_model_args(
    p: argparse.ArgumentParser, *, text_graph: bool = True, shape: bool = False
) -> None:
    """Options shared by every command that talks to a model (defined once, in ``options``).

    ``text_graph=False`` (``swe``) leaves out what only the text graph uses
    (compactor, batching, client choice, log-probs, token ids, progress bar),
    so no flag is listed that would do nothing. ``shape`` adds ``--preset`` /
    ``--rounds``.
    """
    names = [o.name for o in MODEL_OPTIONS if text_graph or o.name not in TEXT_GRAPH_ONLY]
    add_options(p, names, shape=shape)


def _add_checkpoint_arg(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--checkpoint",
        metavar="URL|none",
        help=f"where unfinished runs are checkpointed so a killed run resumes (default: SQLite "
        f"file {default}); postgresql://... for Postgres, sqlite:///path, memory, or none",
    )


class _DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that states every option's default.

    An option whose help does not already say its default gets
    ``(default: X)`` appended; options without a default (``None``) state it
    in their own help text, and flags (``store_true``) need none.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            action.option_strings
            and "default" not in text
            and action.default is not None
            and action.default is not False
            and action.default is not argparse.SUPPRESS
            and action.nargs != 0
        ):
            default = action.default
            if isinstance(default, list) and not default:
                default = "none"
            text = f"{text} (default: {default})" if text else f"default: {default}"
        return text


class _Parser(argparse.ArgumentParser):
    """An argument parser whose help (and every subcommand's) states defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


_SETTINGS_EPILOG = (
    "Model options also read PACORE_<OPTION> environment variables (PACORE_BASE_URL, "
    "PACORE_MODEL, PACORE_API_KEY, PACORE_MAX_TOKENS, ...): a flag wins over its variable, "
    "a variable over the default."
)


def build_parser() -> argparse.ArgumentParser:
    from pacore_graph import __version__

    parser = _Parser(
        prog="pacore",
        description="PaCoRe parallel coordinated reasoning on LangGraph.",
        epilog=f"{_SETTINGS_EPILOG} {_EPILOG}",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="answer a question, or run a JSONL dataset", epilog=_EPILOG)
    run.add_argument("question", nargs="?", help="the question (omit with --input)")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument(
        "--input",
        type=Path,
        help="JSONL dataset of {id, messages, ground_truth?} (default: none: answer QUESTION)",
    )
    run.add_argument(
        "--output",
        type=Path,
        help="results JSONL: with --input, resumed when it exists (one line per id); "
        "with a QUESTION, the result's line is written there (default: none, printed only)",
    )
    run.add_argument(
        "--template",
        type=Path,
        help="Jinja2 file replacing the synthesis prompt (default: the packaged one)",
    )
    _add_checkpoint_arg(run, "OUTPUT" + RUN_CHECKPOINT_SUFFIX)
    _add_model_args(run, shape=True)
    _add_round_control_args(run)

    ev = sub.add_parser(
        "eval", help="compare PaCoRe with baselines at matched compute", epilog=_EPILOG
    )
    ev.add_argument("--dataset", type=Path, required=True, help="JSONL with ground_truth answers")
    ev.add_argument(
        "--methods",
        default="pacore:low,single,majority:4",
        help="comma-separated: pacore:low|medium|high|8+2, single, majority:K, refine:R",
    )
    ev.add_argument("--samples", type=int, default=1, help="independent runs per problem")
    ev.add_argument("--out", type=Path, required=True, help="output directory (resumable)")
    ev.add_argument("--grader", help=_GRADER_HELP)
    ev.add_argument(
        "--limit", type=int, help="only the first N problems of the dataset (default: all)"
    )
    _add_checkpoint_arg(ev, "DIR/" + EVAL_CHECKPOINT_FILE)
    _add_model_args(ev)
    _add_round_control_args(ev)

    swe = sub.add_parser("swe", help="fix an issue in a repository with parallel tool explorers")
    swe.add_argument("--repo", type=Path, required=True, help="the repository directory")
    swe.add_argument("--issue", type=Path, required=True, help="a file with the issue text")
    swe.add_argument("--test", required=True, help='the test command, e.g. "pytest -q"')
    swe.add_argument("--max-steps", type=int, default=12, help="model calls per explorer")
    swe.add_argument(
        "--diff-out", type=Path, help="write the final diff here (default: none, printed only)"
    )
    swe.add_argument("--json", action="store_true", help="print one JSON object")
    _add_model_args(swe, text_graph=False, shape=True)

    graph = sub.add_parser("graph", help="draw a run's message-passing graph to PNG")
    graph.add_argument("results", type=Path, help="results.jsonl of pacore run or pacore eval")
    graph.add_argument("--id", required=True, help="the problem id (request_id / problem_id)")
    graph.add_argument("--out", type=Path, required=True, help="PNG file to write")
    graph.add_argument(
        "--method", help="with pacore eval results: which method's run (default: the only one)"
    )
    graph.add_argument(
        "--sample", type=int, default=0, help="with pacore eval results: which sample"
    )
    graph.add_argument(
        "--json", type=Path, dest="json_out", help="also write node-link JSON (default: none)"
    )
    graph.add_argument("--graphml", type=Path, help="also write GraphML (default: none)")
    graph.add_argument("--grader", help="grader for correctness colours (default: math)")

    ex = sub.add_parser("export-episodes", help="turn run/eval results into RL episodes")
    ex.add_argument("results", type=Path, nargs="+", help="results.jsonl of pacore run/eval")
    ex.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output folder, or with --format jsonl/parquet a file name ending in .jsonl/.parquet",
    )
    ex.add_argument("--format", choices=["jsonl", "parquet", "hf"], default="jsonl")
    ex.add_argument("--grader", help=_GRADER_HELP)

    ts = sub.add_parser(
        "trainset", help="build a training set with the paper's message-pool recipe"
    )
    ts.add_argument("sources", type=Path, nargs="+", help="PaCoRe-Train files or results files")
    ts.add_argument("--out", type=Path, required=True)
    ts.add_argument("--format", choices=["jsonl", "parquet", "hf"], default="jsonl")
    ts.add_argument("--min-messages", type=int, default=16, help="|M| ~ U(min, max)")
    ts.add_argument("--max-messages", type=int, default=24)
    ts.add_argument("--prompts-per-problem", type=int, default=1)
    ts.add_argument("--seed", type=int, default=0, help="seed of the message-pool sampling")
    ts.add_argument("--math-threshold", type=float, default=9 / 24, help="stage-1 upper bound")
    ts.add_argument("--code-threshold", type=float, default=15 / 24, help="stage-1 upper bound")
    ts.add_argument("--no-stage1", action="store_true", help="keep every problem in stage 1")
    ts.add_argument(
        "--synthesis-results",
        type=Path,
        action="append",
        default=[],
        help="synthesis results for the stage-2 filter (repeatable)",
    )
    ts.add_argument("--grader", help=_GRADER_HELP)
    add_options(ts, ["compactor"])

    tr = sub.add_parser("train", help="train with TRL (PPO, GRPO or RLOO) on exported prompts")
    tr.add_argument("--dataset", type=Path, required=True, help="a trainset or episodes dir/file")
    tr.add_argument("--model", required=True, help="a local model directory (or hub name)")
    tr.add_argument(
        "--algo",
        choices=["grpo", "rloo", "ppo"],
        default="grpo",
        help="ppo: the paper's PPO with a critic (GAE lambda=gamma=1); grpo/rloo: critic-free",
    )
    tr.add_argument("--max-steps", type=int, default=10)
    tr.add_argument(
        "--output-dir", type=Path, help="where the model is saved (default: DATASET-ALGO beside it)"
    )
    tr.add_argument("--num-generations", type=int, default=8)
    tr.add_argument(
        "--batch-size",
        type=int,
        help="completions per device batch (default: one prompt's "
        "--num-generations group; 4 prompts with ppo)",
    )
    tr.add_argument("--max-completion-length", type=int, default=1024)
    tr.add_argument("--learning-rate", type=float, default=1e-6)
    add_options(tr, ["compactor"])
    tr.add_argument("--grader", help=_GRADER_HELP)
    tr.add_argument("--seed", type=int, default=0, help="training seed")
    tr.add_argument("--cpu", action="store_true", help="train on the CPU even if a GPU exists")
    tr.add_argument(
        "--config",
        type=Path,
        help="YAML or JSON file of TRL config fields (PPOConfig/GRPOConfig/RLOOConfig), "
        "applied over the flags (default: none)",
    )
    tr.add_argument(
        "--report-to",
        default="none",
        help="TRL reporters, comma-separated: none | tensorboard | wandb | trackio ...",
    )
    tr.add_argument("--kl-coef", type=float, default=0.0, help="PPO's KL coefficient (default 0)")
    tr.add_argument(
        "--scale-rewards",
        choices=["none", "group", "batch"],
        default="none",
        help="GRPO advantage scaling (default none, see docs/rl.md)",
    )
    tr.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in the backward pass: less memory, more time",
    )

    model = sub.add_parser(
        "model", help="the embedded model as a Hugging Face folder, and serving one"
    )
    model_sub = model.add_subparsers(dest="model_command", required=True)
    mexp = model_sub.add_parser(
        "export", help="write the embedded SmolLM2-135M (packaged GGUF) as a Hugging Face folder"
    )
    mexp.add_argument("--out", type=Path, required=True, help="the folder to write")
    mexp.add_argument("--gguf", type=Path, help="another GGUF file (default: the packaged one)")
    mexp.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    mserve = model_sub.add_parser(
        "serve", help="serve a model folder as an OpenAI-compatible API on the CPU (honours n)"
    )
    mserve.add_argument("model_dir", type=Path, help="a Hugging Face model folder")
    mserve.add_argument("--host", default="127.0.0.1")
    mserve.add_argument("--port", type=int, default=8000)
    mserve.add_argument("--name", help="model name reported to clients (default: folder name)")

    srv = sub.add_parser("serve", help="serve PaCoRe behind an OpenAI-compatible API")
    srv.add_argument(
        "--upstream",
        action="append",
        required=True,
        help="OpenAI-compatible model server, e.g. http://gpu1:8000/v1; repeat for replicas",
    )
    srv.add_argument("--model", required=True, help="the upstreams' served model name")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument(
        "--api-key", help="key clients must send as Bearer (default: $PACORE_SERVE_API_KEY)"
    )
    srv.add_argument(
        "--upstream-api-key", help="key sent upstream (default: $PACORE_API_KEY/$OPENAI_API_KEY)"
    )
    srv.add_argument(
        "--max-concurrency", type=int, default=64, help="PaCoRe runs at once (more get 429)"
    )
    srv.add_argument(
        "--max-samples-in-flight",
        type=int,
        default=256,
        help="upstream sequences in flight at most, over all runs and replicas",
    )
    # The sampling options, as for run/eval; a request's own values win over them.
    add_options(srv, SAMPLING_OPTION_NAMES)
    srv.add_argument(
        "--drain-timeout", type=int, default=600, help="seconds SIGTERM waits for runs"
    )
    srv.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    data = sub.add_parser("data", help="generate evaluation datasets")
    data.add_argument("kind", choices=["arithmetic", "easy-arithmetic"])
    data.add_argument("--n", type=int, default=100, help="number of problems")
    data.add_argument("--seed", type=int, default=0, help="generator seed")
    data.add_argument(
        "--out", type=Path, required=True, help="JSONL file to write (streamed, any --n)"
    )
    return parser


def _config(args: argparse.Namespace, embedded: bool) -> PaCoReConfig:
    """The run configuration: the resolved settings plus this command's round control."""
    extra: dict[str, Any] = {}
    for key in ("round_quorum", "round_deadline", "early_stop_consensus", "token_budget"):
        value = getattr(args, key, None)
        if value is not None:
            extra[key] = value
    settings: PaCoReSettings = args.settings
    return settings.to_config(embedded=embedded, **extra)


def _resolve_settings(args: argparse.Namespace) -> None:
    """Resolve this command's model options (flag > ``PACORE_*`` > default) onto ``args``.

    Afterwards ``args.settings`` is the :class:`PaCoReSettings` and every
    option the command lists holds its resolved value, so the command code
    reads ``args.max_tokens`` whether it came from a flag or the environment.
    """
    from pydantic import ValidationError

    from pacore_graph.env_settings import format_settings_error, load_settings

    fields: tuple[str, ...] = getattr(args, "settings_fields", ())
    if not fields:
        return
    try:
        settings = load_settings({name: getattr(args, name) for name in fields}, only=fields)
    except ValidationError as exc:
        raise UsageError(format_settings_error(exc)) from None
    for name in fields:
        setattr(args, name, getattr(settings, name))
    args.settings = settings


def _format_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "config"
        parts.append(f"{where}: {err['msg']}")
    return "invalid configuration: " + "; ".join(parts)


@dataclass
class _Endpoint:
    base_urls: list[str]
    model: str


@contextlib.asynccontextmanager
async def _endpoint(args: argparse.Namespace) -> AsyncIterator[_Endpoint]:
    if args.base_url and not args.model:
        raise UsageError("--model is required with --base-url (the served model's name)")
    if args.base_url:
        _check_base_urls(args.base_url)
        yield _Endpoint(list(args.base_url), args.model)
        return
    from pacore_graph.embedded import model_endpoint

    print(
        "starting the embedded model server (SmolLM2-135M-Instruct, llama.cpp)...", file=sys.stderr
    )
    started = time.perf_counter()
    async with model_endpoint(None, None) as (base_url, model):
        print(
            f"embedded server ready in {time.perf_counter() - started:.1f}s at {base_url}",
            file=sys.stderr,
        )
        yield _Endpoint([base_url], model)


@contextlib.contextmanager
def _tracing(args: argparse.Namespace) -> Iterator[TraceOptions]:
    """Trace options for the run; flushes and shuts the exporter down at the end."""
    from pacore_graph.telemetry import TracingConfigError, configure_tracing, exporter_kinds
    from pacore_graph.tracing import TraceOptions

    capture = True if args.trace_content else None
    try:
        kinds = exporter_kinds(args.trace)  # --trace, else OTEL_TRACES_EXPORTER
        provider = configure_tracing(kinds) if kinds else None
    except TracingConfigError as exc:
        raise UsageError(str(exc)) from None
    if provider is None:
        yield TraceOptions(capture_content=capture)
        return
    try:
        yield TraceOptions(tracer_provider=provider, capture_content=capture)
    finally:
        provider.shutdown()


def _client(args: argparse.Namespace, endpoint: _Endpoint, config: PaCoReConfig) -> ChatClient:
    from pacore_graph.multi_client import chat_client_for

    if args.client == "langchain":
        from pacore_graph.langchain_client import LangChainChatClient, make_chat_model

        if len(endpoint.base_urls) > 1:
            raise UsageError("--client langchain takes one --base-url; use the direct client")
        chat = make_chat_model(
            endpoint.base_urls[0],
            endpoint.model,
            api_key=args.api_key,
            sampling=config.sampling,
            retry=config.retry,
        )
        return LangChainChatClient(chat, model=endpoint.model)
    return chat_client_for(
        endpoint.base_urls, endpoint.model, api_key=args.api_key, retry=config.retry
    )


def _summary(result: PaCoReResult) -> str:
    widths = "+".join(str(len(r)) for r in result.rounds)
    per_round = ", ".join(str(t) for t in result.ttc_per_round)
    return (
        f"rounds: {len(result.rounds)} ({widths})  trajectories: {len(result.trajectories)}  "
        f"failures: {result.failures}  truncated: {result.truncations}  "
        f"effective TTC: {result.effective_ttc} tokens ({per_round})  "
        f"wall: {result.wall_s:.1f}s"
    )


async def _run(args: argparse.Namespace) -> int:
    if args.input is None and not args.question:
        raise UsageError("give a QUESTION, or --input data.jsonl --output results.jsonl")
    if args.input is not None and args.question:
        raise UsageError("give either a QUESTION or --input, not both")
    if args.input is not None and args.output is None:
        raise UsageError("--input needs --output (results are written as each problem finishes)")
    if args.question is not None and not args.question.strip():
        raise UsageError("empty problem: the question has no text")
    if args.question is not None:
        _utf8_text(args.question, "the question")
    _check_base_urls(args.base_url)
    config, compactor = _prepare(args)
    template = _template(args.template)
    if args.output is not None:
        _writable_file(args.output, "--output")
    records: list[Any] = []
    input_errors: list[Any] = []
    if args.input is not None:
        from pacore_graph.runner import read_dataset

        _readable_file(args.input, "--input")
        records, input_errors = read_dataset(args.input)
        for err in input_errors:
            print(f"{args.input}:{err}", file=sys.stderr)
        if not records:
            raise UsageError(f"{args.input}: no usable records")

    with _tracing(args) as trace_options:
        return await _run_with(
            args, config, compactor, template, records, input_errors, trace_options
        )


async def _run_with(
    args: argparse.Namespace,
    config: PaCoReConfig,
    compactor: Any,
    template: str,
    records: list[Any],
    input_errors: list[Any],
    trace_options: TraceOptions,
) -> int:
    from pacore_graph.graph import ainvoke_pacore, build_pacore_graph

    async with _endpoint(args) as endpoint:
        client = _client(args, endpoint, config)
        try:
            graph = build_pacore_graph(
                client,
                config=config,
                compactor=compactor,
                template=template,
                tracing=trace_options,
            )
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
        try:
            if args.input is None:
                if args.json:
                    result = await ainvoke_pacore(graph, args.question)
                    if args.output is not None:
                        _write_question_result(args.output, args.question, result)
                    print(json.dumps(result.to_dict(), ensure_ascii=False))
                    return 0
                from pacore_graph.live import run_live

                result, streamed = await run_live(
                    graph,
                    args.question,
                    err=None if args.no_progress else sys.stderr,
                    out=sys.stdout if sys.stdout.isatty() else None,
                )
                if args.output is not None:
                    _write_question_result(args.output, args.question, result)
                if not streamed:
                    print(result.answer.strip())
                print()
                print(_summary(result))
                return 0
            from pacore_graph.runner import run_dataset

            async with _checkpointer(args.checkpoint, args.output) as saver:
                summary = await run_dataset(
                    graph,
                    records,
                    args.output,
                    progress=not args.no_progress,
                    max_problems_in_flight=max(config.max_concurrency, 1),
                    checkpointer=saver,
                )
            report = {
                "output": str(args.output),
                "problems": summary.total,
                "skipped_finished": summary.skipped,
                "succeeded": summary.succeeded,
                "failed": summary.failed,
                "input_errors": len(input_errors),
                "effective_ttc": summary.effective_ttc,
                "wall_s": round(summary.wall_s, 2),
            }
            if args.json:
                print(json.dumps(report))
            else:
                print(" ".join(f"{k}={v}" for k, v in report.items()))
            if summary.failed:
                return EXIT_FAILED
            return EXIT_SKIPPED_INPUT if input_errors else EXIT_OK
        finally:
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()


@contextlib.asynccontextmanager
async def _checkpointer(
    spec: str | None, output: Path, *, eval_dir: bool = False
) -> AsyncIterator[Any]:
    """The ``--checkpoint`` saver for the block; a UsageError when it cannot be opened."""
    from pacore_graph.checkpoint import default_checkpoint_path, open_checkpointer

    default = default_checkpoint_path(output, eval_dir=eval_dir)
    async with contextlib.AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(open_checkpointer(spec, default))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        yield saver


def _template(path: Path | None) -> str:
    """The synthesis template: the packaged one, or the user's file (read before any call)."""
    if path is None:
        from pacore_graph.prompts import SYNTHESIS_TEMPLATE

        return SYNTHESIS_TEMPLATE
    _readable_file(path, "--template")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--template {path}: not UTF-8 text (byte {exc.start})") from None


def _write_question_result(path: Path, question: str, result: PaCoReResult) -> None:
    """``pacore run "Q" --output F``: F gets the run's results line, as a dataset run writes."""
    from pacore_graph.atomic import write_lines_atomic
    from pacore_graph.runner import DatasetRecord, result_line

    record = DatasetRecord(
        id=result.problem_id or "question",
        messages=({"role": "user", "content": question},),
        line=1,
    )
    write_lines_atomic(path, [json.dumps(result_line(record, result), ensure_ascii=False)])
    print(f"wrote {path}", file=sys.stderr)


def _prepare(args: argparse.Namespace) -> tuple[PaCoReConfig, Any]:
    """Config and compactor from the shared options; UsageError when they are invalid."""
    from pydantic import ValidationError

    from pacore_graph.compaction import compactor_from_name

    try:
        config = _config(args, embedded=not args.base_url)
    except ValidationError as exc:
        raise UsageError(_format_validation(exc)) from None
    try:
        compactor = compactor_from_name(getattr(args, "compactor", "conclusion"))
    except (ValueError, ImportError, AttributeError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    return config, compactor


async def _eval(args: argparse.Namespace) -> int:
    from pacore_graph.eval.graders import grader_from_name
    from pacore_graph.eval.harness import run_eval
    from pacore_graph.eval.methods import parse_methods
    from pacore_graph.runner import read_dataset

    if args.samples < 1:
        raise UsageError(f"--samples must be >= 1, got {args.samples}")
    try:
        methods = parse_methods(args.methods)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        grader = grader_from_name(args.grader) if args.grader else None
    except (ValueError, ImportError, TypeError) as exc:
        raise UsageError(f"--grader: {exc}") from None
    _readable_file(args.dataset, "--dataset")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a file; pacore eval writes a folder there")
    _check_base_urls(args.base_url)
    config, compactor = _prepare(args)
    records, input_errors = read_dataset(args.dataset)
    for err in input_errors:
        print(f"{args.dataset}:{err}", file=sys.stderr)
    if args.limit is not None:
        records = records[: max(0, args.limit)]
    if not records:
        raise UsageError(f"{args.dataset}: no usable records")
    async with _endpoint(args) as endpoint:
        client = _client(args, endpoint, config)
        try:
            with _tracing(args) as trace_options:
                async with _checkpointer(args.checkpoint, args.out, eval_dir=True) as saver:
                    outcome = await run_eval(
                        records,
                        methods,
                        client,
                        config=config,
                        out_dir=args.out,
                        samples=args.samples,
                        grader=grader,
                        compactor=compactor,
                        progress=not args.no_progress,
                        meta={"dataset": str(args.dataset)},
                        tracing=trace_options,
                        checkpointer=saver,
                    )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        finally:
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()
    print(outcome.report_md.read_text(encoding="utf-8"))
    print(f"wrote {outcome.report_json}, {outcome.report_md}, {outcome.plot}")
    return EXIT_SKIPPED_INPUT if input_errors else EXIT_OK


def _graph(args: argparse.Namespace) -> int:
    from pacore_graph.message_graph import graph_command

    grader = None
    if args.grader:
        from pacore_graph.eval.graders import grader_from_name

        try:
            grader = grader_from_name(args.grader)
        except (ValueError, ImportError, TypeError) as exc:
            raise UsageError(f"--grader: {exc}") from None
    try:
        path = graph_command(
            args.results,
            args.id,
            args.out,
            method=args.method,
            sample=args.sample,
            json_out=args.json_out,
            graphml_out=args.graphml,
            grader=grader,
        )
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}")
    return 0


async def _swe(args: argparse.Namespace) -> int:
    from pacore_graph.graphs.pacore_swe import check_repository, run_swe
    from pacore_graph.langchain_client import aclose_chat_model, make_chat_model

    if not args.base_url or not args.model:
        raise UsageError(
            "pacore swe needs a tool-calling model: --base-url URL --model NAME "
            "(the embedded 135M model cannot call tools)"
        )
    if len(args.base_url) > 1:
        raise UsageError("pacore swe takes one --base-url")
    try:
        check_repository(args.repo)
    except ValueError as exc:
        raise UsageError(f"--repo {args.repo}: {exc}") from None
    if not args.issue.is_file():
        raise UsageError(f"--issue {args.issue}: no such file")
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be >= 1, got {args.max_steps}")
    if not args.test.strip():
        raise UsageError('--test is empty: give the test command, e.g. --test "pytest -q"')
    if args.diff_out is not None:
        _check_writable("--diff-out", args.diff_out)
    try:
        issue = args.issue.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--issue {args.issue}: cannot read it as UTF-8 text: {exc}") from None
    if not issue.strip():
        raise UsageError(f"--issue {args.issue}: the issue text is empty")
    config, _ = _prepare(args)
    chat = make_chat_model(
        args.base_url[0],
        args.model,
        api_key=args.api_key,
        sampling=config.sampling,
        retry=config.retry,
    )
    try:
        with _tracing(args) as trace_options:
            outcome = await run_swe(
                chat,
                args.repo,
                issue,
                args.test,
                config=config,
                max_steps=args.max_steps,
                tracing=trace_options,
            )
    finally:
        await aclose_chat_model(chat)
    diff_lost = False
    if args.diff_out is not None:
        try:
            args.diff_out.write_text(outcome.diff, encoding="utf-8")
        except OSError as exc:  # checked up front, but the disk may have changed since
            print(f"pacore: error: --diff-out {args.diff_out}: {exc}", file=sys.stderr)
            diff_lost = True
    attempts = outcome.result.trajectories
    passing = sum(bool(t.artifacts.get("tests_passed")) for t in attempts)
    if args.json:
        print(
            json.dumps(
                {
                    "resolved": outcome.resolved,
                    "applied": outcome.applied,
                    "tests_passed": outcome.tests_passed,
                    "diff": outcome.diff,
                    "apply_message": outcome.apply_message,
                    "test_output": outcome.test_output,
                    "attempts_passing": passing,
                    "attempts": len(attempts),
                    "effective_ttc": outcome.result.effective_ttc,
                    "result": outcome.result.to_dict(),
                },
                ensure_ascii=False,
            )
        )
    else:
        print(outcome.diff or "(the final attempt changed nothing)")
        print(_summary(outcome.result))
        print(f"attempts passing their tests: {passing}/{len(attempts)}")
        if not outcome.applied:
            print(f"final diff did not apply: {outcome.apply_message}")
        else:
            verdict = "PASSED" if outcome.tests_passed else "FAILED"
            print(f"final diff on a fresh copy: tests {verdict}")
        print("RESOLVED" if outcome.resolved else "NOT RESOLVED")
    if diff_lost:
        return 2  # the diff is on stdout above, not in the file that was asked for
    return 0 if outcome.resolved else 1


def _check_writable(flag: str, path: Path) -> None:
    """Refuse an output path that cannot be written, before any model call is paid for."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a directory")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise UsageError(f"{flag} {path}: not writable")


def _grader_arg(spec: str | None) -> Any:
    if not spec:
        return None
    from pacore_graph.eval.graders import grader_from_name

    try:
        return grader_from_name(spec)
    except (ValueError, ImportError, TypeError) as exc:
        raise UsageError(f"--grader: {exc}") from None


def _reporters(value: str) -> str | list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise UsageError("--report-to: name at least one reporter, or none")
    return names[0] if len(names) == 1 else names


def _rl(args: argparse.Namespace) -> int:
    """export-episodes, trainset and train: bad input and a missing [rl] extra exit 2."""
    try:
        if args.command == "export-episodes":
            from pacore_graph.rl.export import export_command

            export_command(args.results, args.out, args.format, grader=_grader_arg(args.grader))
        elif args.command == "trainset":
            from pacore_graph.rl.recipe import build_trainset_command

            build_trainset_command(
                args.sources,
                args.out,
                fmt=args.format,
                min_messages=args.min_messages,
                max_messages=args.max_messages,
                prompts_per_problem=args.prompts_per_problem,
                seed=args.seed,
                math_threshold=args.math_threshold,
                code_threshold=args.code_threshold,
                no_stage1=args.no_stage1,
                synthesis_results=args.synthesis_results,
                grader=_grader_arg(args.grader),
                compactor=args.compactor,
            )
        else:
            from pacore_graph.rl.train import train_command

            train_command(
                args.dataset,
                args.model,
                args.algo,
                args.max_steps,
                output_dir=args.output_dir,
                num_generations=args.num_generations,
                per_device_train_batch_size=args.batch_size,
                max_completion_length=args.max_completion_length,
                learning_rate=args.learning_rate,
                compactor=args.compactor,
                grader=_grader_arg(args.grader),
                seed=args.seed,
                use_cpu=True if args.cpu else None,
                config_file=args.config,
                report_to=_reporters(args.report_to),
                kl_coef=args.kl_coef,
                scale_rewards=args.scale_rewards,
                gradient_checkpointing=True if args.gradient_checkpointing else None,
            )
    except (FileNotFoundError, ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    return 0


def _serve(args: argparse.Namespace) -> int:
    import os

    from pydantic import ValidationError

    from pacore_graph.compaction import compactor_from_name
    from pacore_graph.config import RetryPolicy, SamplingParams

    try:
        from pacore_graph.serve import API_KEY_ENV_VAR, ServeSettings, serve
    except ImportError as exc:
        raise UsageError(
            f"pacore serve needs the serve extra (pip install 'pacore-graph[serve]'): {exc}"
        ) from None
    sampling: dict[str, Any] = {}
    for key in ("temperature", "top_p", "max_tokens", "timeout"):
        value = getattr(args, key)
        if value is not None:
            sampling[key] = value
    try:
        compactor_from_name(args.compactor)
        settings = ServeSettings(
            upstreams=tuple(args.upstream),
            model=args.model,
            api_key=args.api_key or os.environ.get(API_KEY_ENV_VAR) or None,
            upstream_api_key=args.upstream_api_key,
            max_concurrency=args.max_concurrency,
            max_samples_in_flight=args.max_samples_in_flight,
            compactor=args.compactor,
            sampling=SamplingParams(**sampling),
            retry=RetryPolicy(max_attempts=args.retries) if args.retries else RetryPolicy(),
        )
    except ValidationError as exc:
        raise UsageError(_format_validation(exc)) from None
    except (ValueError, ImportError, AttributeError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in [0, 65535], got {args.port}")
    serve(
        settings,
        host=args.host,
        port=args.port,
        drain_timeout=args.drain_timeout,
        log_level=args.log_level,
    )
    return 0


def _model(args: argparse.Namespace) -> int:
    """model export / model serve: bad input and a missing [rl] extra exit 2."""
    try:
        if args.model_command == "export":
            from pacore_graph.rl.model_export import model_export_command

            model_export_command(args.out, gguf=args.gguf, dtype=args.dtype)
            return 0
        from pacore_graph.rl.model_server import serve_command

        return serve_command(args.model_dir, host=args.host, port=args.port, name=args.name)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None


def _data(args: argparse.Namespace) -> int:
    from pacore_graph.eval.datasets import generate_dataset

    _writable_file(args.out, "--out")
    try:
        count = generate_dataset(args.kind, args.n, args.seed, args.out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {count} {args.kind} problems to {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import asyncio  # not before: ``pacore --help`` need not pay for it

    try:
        _resolve_settings(args)
        if args.command in ("run", "eval"):
            from pacore_graph.gc_tuning import fan_out_gc

            with fan_out_gc():  # thousands of explorer tasks: collect less often
                return asyncio.run(_run(args) if args.command == "run" else _eval(args))
        if args.command == "data":
            return _data(args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "graph":
            return _graph(args)
        if args.command == "swe":
            return asyncio.run(_swe(args))
        if args.command in ("export-episodes", "trainset", "train"):
            return _rl(args)
        if args.command == "model":
            return _model(args)
    except UsageError as exc:
        print(f"pacore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PaCoReError as exc:
        print(f"pacore: run failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        # A file that became unwritable mid-run, a full disk: one line, not a traceback.
        print(f"pacore: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("pacore: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command!r}")
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
