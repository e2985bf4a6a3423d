"""``pacore trainset``: the paper's training set from a cached message pool.

The paper does not train on live multi-round runs. For each problem it
caches a pool of responses (24, generated offline); each training episode
samples |M| ~ U(16, 24) of them and asks the model to synthesise from
P(x, M). Two curriculum filters keep the problems where synthesis has
something to learn:

- stage 1: the pool's mean accuracy is strictly between 0 and a threshold
  (9/24 for math, 15/24 for code), so the answer is in the pool but majority
  voting over it would not find it;
- stage 2: the model's own synthesis accuracy on those prompts is strictly
  between 0 and 1 (all-wrong or all-right groups carry no learning signal).

The pool comes from records in the released PaCoRe-Train format
(``conversation``, ``responses``, ``ground_truth``) or from this project's
runs (see :mod:`pacore_graph.rl.pool`, which reads both). Sampling is reproducible: each
problem has its own random stream, seeded by the recipe's seed and the
problem id, so adding or filtering other problems never changes its prompts.

Output rows are TRL conversational prompts plus the columns the reward
function reads: ``{"prompt": [...], "ground_truth": JSON text, "problem_id",
"category", ...}``.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from pacore_graph.eval.graders import Grader, auto_grader, grade_response, ground_truth_answer
from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.rl import require_rl
from pacore_graph.rl.episodes import chat_message
from pacore_graph.rl.pool import (
    PoolProblem,
    load_pool,
    pool_from_results,
    read_pacore_train,
    read_records,
)
from pacore_graph.rl.rewards import decode_ground_truth, encode_ground_truth
from pacore_graph.rl.rows import ROW_FORMATS, check_row_format, write_jsonl, write_rows
from pacore_graph.values.answers import problem_text
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, compactor_from_name
from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE, synthesis_messages

__all__ = [
    "CODE_CATEGORIES",
    "DEFAULT_THRESHOLDS",
    "TRAINSET_FORMATS",
    "PoolProblem",
    "ProblemStats",
    "RecipeConfig",
    "TrainsetReport",
    "TrainsetResult",
    "build_trainset",
    "build_trainset_command",
    "load_pool",
    "load_synthesis_scores",
    "pool_from_results",
    "read_pacore_train",
    "write_trainset",
]

#: Stage-1 upper bounds on the pool's mean accuracy, by task family (the paper's).
DEFAULT_THRESHOLDS: Mapping[str, float] = MappingProxyType({"math": 9 / 24, "code": 15 / 24})
#: Record categories that count as code for the stage-1 threshold.
CODE_CATEGORIES = frozenset({"code", "coding", "programming", "livecodebench", "swe"})
TRAINSET_FORMATS = ROW_FORMATS
TRAINSET_JSONL = "trainset.jsonl"
TRAINSET_PARQUET = "trainset.parquet"
PROBLEMS_JSONL = "problems.jsonl"
EVAL_DATASET_JSONL = "synthesis_eval.jsonl"
REPORT_NAME = "trainset_report.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecipeConfig:
    """The recipe's knobs; the defaults are the paper's.

    ``min_messages``..``max_messages`` is the inclusive range of |M| (the
    paper trains with 16..24; its ablation found 8..16 best on its
    benchmarks). A pool smaller than the drawn size gives all its messages
    (counted as ``capped_prompts``). ``prompts_per_problem`` draws that many
    independent message sets per kept problem.
    """

    min_messages: int = 16
    max_messages: int = 24
    prompts_per_problem: int = 1
    seed: int = 0
    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    stage1: bool = True
    compactor: str = DEFAULT_COMPACTOR
    template: str = SYNTHESIS_TEMPLATE

    def __post_init__(self) -> None:
        if not 1 <= self.min_messages <= self.max_messages:
            raise ValueError(
                "need 1 <= min_messages <= max_messages, "
                f"got {self.min_messages}..{self.max_messages}"
            )
        if self.prompts_per_problem < 1:
            raise ValueError(f"prompts_per_problem must be >= 1, got {self.prompts_per_problem}")
        for name, value in self.thresholds.items():
            if not 0 < value <= 1:
                raise ValueError(f"stage-1 threshold for {name!r} must be in (0, 1], got {value}")
        if "math" not in self.thresholds:
            raise ValueError("thresholds needs a 'math' entry: it is the default family")
        compactor_from_name(self.compactor)  # fail early on a bad name

    def family(self, category: str | None) -> str:
        """``code`` for code categories, the category itself when it has a threshold, else math."""
        key = (category or "").strip().lower()
        if key in self.thresholds:
            return key
        return "code" if key in CODE_CATEGORIES and "code" in self.thresholds else "math"

    def threshold(self, category: str | None) -> float:
        """The stage-1 upper bound for a record's category."""
        return self.thresholds[self.family(category)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProblemStats:
    """One problem's way through the filters (a line of ``problems.jsonl``)."""

    problem_id: str
    category: str | None
    pool_size: int
    pool_accuracy: float | None
    threshold: float
    stage1_kept: bool
    synthesis_accuracy: float | None = None
    synthesis_samples: int = 0
    stage2_kept: bool | None = None
    rows: int = 0
    dropped_because: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainsetReport:
    """How many problems each filter kept, and what was written."""

    problems: int
    no_ground_truth: int
    empty_pool: int
    stage1_enabled: bool
    stage1_kept: int
    stage1_none_right: int
    stage1_too_easy: int
    stage2_applied: bool
    stage2_kept: int | None
    stage2_no_results: int
    stage2_all_wrong: int
    stage2_all_right: int
    rows: int
    capped_prompts: int
    min_messages: int
    max_messages: int
    seed: int
    files: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        lines = [
            f"problems: {self.problems}  (no ground truth: {self.no_ground_truth}, "
            f"empty pool: {self.empty_pool})",
        ]
        if self.stage1_enabled:
            lines.append(
                f"stage 1 (0 < pool accuracy < threshold): kept {self.stage1_kept}  "
                f"(none right: {self.stage1_none_right}, too easy: {self.stage1_too_easy})"
            )
        else:
            lines.append(f"stage 1: off, {self.stage1_kept} problems with a graded pool")
        if self.stage2_applied:
            lines.append(
                f"stage 2 (0 < synthesis accuracy < 1): kept {self.stage2_kept}  "
                f"(no results: {self.stage2_no_results}, all wrong: {self.stage2_all_wrong}, "
                f"all right: {self.stage2_all_right})"
            )
        else:
            lines.append("stage 2: not applied (no synthesis results given)")
        lines.append(
            f"rows: {self.rows}  |M| ~ U({self.min_messages}, {self.max_messages}), "
            f"seed {self.seed}; prompts capped by a small pool: {self.capped_prompts}"
        )
        lines += [f"wrote {f}" for f in self.files]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainsetResult:
    """The rows, each problem's statistics, and the report."""

    rows: tuple[Mapping[str, Any], ...]
    problems: tuple[ProblemStats, ...]
    report: TrainsetReport


_PROMPT_SUFFIX_SEP = "#"


def _base_problem_id(value: Any) -> str:
    """``pid#3`` (a trainset prompt id) -> ``pid``; other ids unchanged."""
    text = str(value)
    head, sep, tail = text.rpartition(_PROMPT_SUFFIX_SEP)
    return head if sep and tail.isdigit() else text


def load_synthesis_scores(paths: str | Path | Sequence[str | Path]) -> dict[str, list[float]]:
    """Per-problem synthesis scores for the stage-2 filter, from results of running the prompts.

    Reads ``pacore eval`` results (``score`` of each run; e.g. ``pacore eval
    --dataset DIR/synthesis_eval.jsonl --methods single --samples 8``) and
    exported episodes (``reward`` of synthesis rounds, ``round >= 1``). Ids
    of trainset prompts (``problem#k``) count for their problem. Failed runs
    and ungraded episodes are left out.
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    scores: dict[str, list[float]] = defaultdict(list)
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"synthesis results {path} do not exist")
        for _position, line in read_records(path):
            if not isinstance(line, Mapping) or line.get("error"):
                continue
            if "reward" in line and "round" in line:  # an episode row
                if int(line["round"]) < 1 or line["reward"] is None:
                    continue
                value = line["reward"]
            elif "score" in line:  # a pacore eval line
                value = line["score"]
            else:
                continue
            pid = line.get("problem_id", line.get("request_id"))
            if pid is None or not isinstance(value, int | float):
                continue
            scores[_base_problem_id(pid)].append(float(value))
    return dict(scores)


# --------------------------------------------------------------------------- building


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _stats(problem: PoolProblem, cfg: RecipeConfig, **fields: Any) -> ProblemStats:
    return ProblemStats(
        problem_id=problem.problem_id,
        category=problem.category,
        pool_size=len(problem.messages),
        threshold=cfg.threshold(problem.category),
        **fields,
    )


def _has_truth(problem: PoolProblem, grader: Grader | None) -> bool:
    gt = problem.ground_truth
    if gt is None:
        return False
    return grader is not None or ground_truth_answer(gt) is not None


def build_trainset(
    problems: Iterable[PoolProblem],
    config: RecipeConfig | None = None,
    *,
    grader: Grader | None = None,
    synthesis_scores: Mapping[str, Sequence[float]] | None = None,
) -> TrainsetResult:
    """Grade each pool, apply the filters, draw the prompts.

    ``grader`` defaults to the one for each problem's ``category``.
    ``synthesis_scores`` (problem id -> scores of the model's syntheses)
    turns on the stage-2 filter; a problem without scores is then dropped,
    since its accuracy is unknown.
    """
    cfg = config or RecipeConfig()
    rows: list[dict[str, Any]] = []
    stats: list[ProblemStats] = []
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for problem in problems:
        total += 1
        threshold = cfg.threshold(problem.category)
        if not _has_truth(problem, grader):
            counts["no_ground_truth"] += 1
            stats.append(
                _stats(
                    problem,
                    cfg,
                    pool_accuracy=None,
                    stage1_kept=False,
                    dropped_because="no ground truth",
                )
            )
            continue
        if not problem.messages:
            counts["empty_pool"] += 1
            stats.append(
                _stats(
                    problem,
                    cfg,
                    pool_accuracy=None,
                    stage1_kept=False,
                    dropped_because="empty pool",
                )
            )
            continue
        chosen = grader or auto_grader(problem.category)
        gt = problem.ground_truth
        asked = problem_text(problem.conversation)
        accuracy = _mean([grade_response(chosen, m, gt, asked).score for m in problem.messages])
        dropped: str | None = None
        if cfg.stage1 and accuracy <= 0:
            counts["stage1_none_right"] += 1
            dropped = "stage 1: no message in the pool is right"
        elif cfg.stage1 and accuracy >= threshold:
            counts["stage1_too_easy"] += 1
            dropped = f"stage 1: pool accuracy {accuracy:.3f} >= {threshold:.3f}"
        if dropped is not None:
            stats.append(
                _stats(
                    problem, cfg, pool_accuracy=accuracy, stage1_kept=False, dropped_because=dropped
                )
            )
            continue
        counts["stage1_kept"] += 1
        syn_acc: float | None = None
        syn_n = 0
        stage2: bool | None = None
        if synthesis_scores is not None:
            found = synthesis_scores.get(problem.problem_id)
            if not found:
                counts["stage2_no_results"] += 1
                stage2, dropped = False, "stage 2: no synthesis results"
            else:
                syn_n, syn_acc = len(found), _mean([float(s) for s in found])
                if syn_acc <= 0:
                    counts["stage2_all_wrong"] += 1
                    stage2, dropped = False, "stage 2: every synthesis wrong"
                elif syn_acc >= 1:
                    counts["stage2_all_right"] += 1
                    stage2, dropped = False, "stage 2: every synthesis right"
                else:
                    counts["stage2_kept"] += 1
                    stage2 = True
        problem_rows: list[dict[str, Any]] = []
        if dropped is None:
            problem_rows, capped = _draw_prompts(problem, cfg, accuracy)
            counts["capped"] += capped
        rows.extend(problem_rows)
        stats.append(
            _stats(
                problem,
                cfg,
                pool_accuracy=accuracy,
                stage1_kept=True,
                synthesis_accuracy=syn_acc,
                synthesis_samples=syn_n,
                stage2_kept=stage2,
                rows=len(problem_rows),
                dropped_because=dropped,
            )
        )
    report = TrainsetReport(
        problems=total,
        no_ground_truth=counts["no_ground_truth"],
        empty_pool=counts["empty_pool"],
        stage1_enabled=cfg.stage1,
        stage1_kept=counts["stage1_kept"],
        stage1_none_right=counts["stage1_none_right"],
        stage1_too_easy=counts["stage1_too_easy"],
        stage2_applied=synthesis_scores is not None,
        stage2_kept=counts["stage2_kept"] if synthesis_scores is not None else None,
        stage2_no_results=counts["stage2_no_results"],
        stage2_all_wrong=counts["stage2_all_wrong"],
        stage2_all_right=counts["stage2_all_right"],
        rows=len(rows),
        capped_prompts=counts["capped"],
        min_messages=cfg.min_messages,
        max_messages=cfg.max_messages,
        seed=cfg.seed,
    )
    return TrainsetResult(rows=tuple(rows), problems=tuple(stats), report=report)


def _draw_prompts(
    problem: PoolProblem, cfg: RecipeConfig, accuracy: float
) -> tuple[list[dict[str, Any]], int]:
    """``prompts_per_problem`` prompts P(x, M) with |M| ~ U(min, max); also how many were capped."""
    # A str seed is hashed with SHA-512 by random.Random: stable across
    # processes and Python runs, unlike hash().
    rng = random.Random(f"pacore-trainset:{cfg.seed}:{problem.problem_id}")
    conversation = normalize_conversation(list(problem.conversation))
    pool = problem.messages
    rows: list[dict[str, Any]] = []
    capped = 0
    for k in range(cfg.prompts_per_problem):
        size = rng.randint(cfg.min_messages, cfg.max_messages)
        if size > len(pool):
            capped += 1
            size = len(pool)
        chosen = rng.sample(range(len(pool)), size)  # random order: the paper shuffles too
        prompt = synthesis_messages(conversation, [pool[i] for i in chosen], cfg.template)
        rows.append(
            {
                "prompt": [chat_message(m) for m in prompt],
                "ground_truth": encode_ground_truth(problem.ground_truth),
                "problem_id": problem.problem_id,
                "category": problem.category,
                "prompt_id": f"{problem.problem_id}{_PROMPT_SUFFIX_SEP}{k}",
                "num_messages": size,
                "message_indices": chosen,
                "pool_accuracy": accuracy,
            }
        )
    return rows, capped


# --------------------------------------------------------------------------- writing


def trainset_features() -> Any:
    """The ``datasets.Features`` of a trainset row (see :func:`build_trainset`)."""
    require_rl("datasets")
    from datasets import Features, List, Value

    string = Value("string")
    return Features(
        {
            "prompt": List({"role": string, "content": string}),
            "ground_truth": string,
            "problem_id": string,
            "category": string,
            "prompt_id": string,
            "num_messages": Value("int64"),
            "message_indices": List(Value("int64")),
            "pool_accuracy": Value("float64"),
        }
    )


def write_trainset(result: TrainsetResult, out: str | Path, fmt: str = "jsonl") -> list[Path]:
    """Write the rows (``jsonl``, ``parquet`` or ``hf``), the per-problem stats and the report.

    Also writes ``synthesis_eval.jsonl``: the prompts as a ``pacore eval``
    dataset (``id``, ``messages``, ``ground_truth``), the way to measure the
    synthesis accuracy the stage-2 filter needs.
    """
    check_row_format(fmt)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir} is a file; give a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [dict(r) for r in result.rows]
    files = [
        write_rows(
            rows,
            fmt,
            out_dir,
            jsonl_name=TRAINSET_JSONL,
            parquet_name=TRAINSET_PARQUET,
            features=trainset_features,
        )
    ]
    problems_path = out_dir / PROBLEMS_JSONL
    write_jsonl(problems_path, [asdict(s) for s in result.problems])
    eval_path = out_dir / EVAL_DATASET_JSONL
    write_jsonl(
        eval_path,
        [
            {
                "id": r["prompt_id"],
                "messages": r["prompt"],
                "ground_truth": decode_ground_truth(r["ground_truth"]),
                **({"category": r["category"]} if r["category"] is not None else {}),
            }
            for r in rows
        ],
    )
    files += [problems_path, eval_path]
    return files


def build_trainset_command(
    sources: Sequence[Path],
    out: Path,
    *,
    fmt: str = "jsonl",
    min_messages: int = 16,
    max_messages: int = 24,
    prompts_per_problem: int = 1,
    seed: int = 0,
    math_threshold: float = DEFAULT_THRESHOLDS["math"],
    code_threshold: float = DEFAULT_THRESHOLDS["code"],
    no_stage1: bool = False,
    synthesis_results: Sequence[Path] = (),
    grader: Grader | None = None,
    compactor: str = DEFAULT_COMPACTOR,
    template: str | None = None,
    stream: IO[str] | None = None,
) -> TrainsetReport:
    """``pacore trainset SOURCE... --out DIR``: build, filter, write, print the report.

    ``sources`` are PaCoRe-Train files and/or results files; with
    ``synthesis_results`` (``pacore eval`` results on ``DIR/synthesis_eval.jsonl``
    of a stage-1 build, or exported episodes) the stage-2 filter is applied
    too. Raises FileNotFoundError / ValueError on bad input (exit code 2).
    """
    if not sources:
        raise ValueError("give at least one source: a PaCoRe-Train file or a results file")
    config = RecipeConfig(
        min_messages=min_messages,
        max_messages=max_messages,
        prompts_per_problem=prompts_per_problem,
        seed=seed,
        thresholds={"math": math_threshold, "code": code_threshold},
        stage1=not no_stage1,
        compactor=compactor,
        template=template or SYNTHESIS_TEMPLATE,
    )
    problems = load_pool(list(sources), compactor=compactor)
    scores = load_synthesis_scores(list(synthesis_results)) if synthesis_results else None
    result = build_trainset(problems, config, grader=grader, synthesis_scores=scores)
    files = write_trainset(result, out, fmt)
    report = TrainsetReport(**{**result.report.to_dict(), "files": tuple(str(f) for f in files)})
    (Path(out) / REPORT_NAME).write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")
    print(report, file=stream or sys.stdout)
    return report
