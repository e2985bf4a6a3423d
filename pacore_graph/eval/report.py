"""Turn per-run evaluation results into per-method statistics and a report.

``pacore eval`` appends one JSON object per (method, problem, sample) run to
``DIR/results.jsonl`` as it goes, so an interrupted evaluation can resume.
This module is the pure arithmetic over those lines and the two files a user
reads afterwards: ``report.json`` (for scripts and CI) and ``report.md`` (for
people and the README). It does no I/O except :func:`write_report`, so the
numbers can be tested on scripted lines without a model.

What a line must hold: ``method`` (the spec as typed, e.g. ``majority:16``)
and ``problem_id``. Everything else has a neutral default (``sample`` 0,
``score`` 0, TTC 0, no error, parsed), and unknown keys are ignored, so the
harness can add fields without breaking old reports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacore_graph.runs.atomic import write_text_atomic
from pacore_graph.runs.private_files import private_dir

__all__ = [
    "CI_Z",
    "MethodStats",
    "dataset_label",
    "mean_interval",
    "report_json",
    "report_markdown",
    "summarize",
    "wilson_interval",
    "write_report",
]

CI_Z = 1.96
"""The two-sided 95% normal quantile, rounded as everyone quotes it, so a reader
can redo the report's intervals by hand (8/10 -> Wilson [0.4902, 0.9433])."""


@dataclass(frozen=True)
class MethodStats:
    """Everything the report and the scaling plot show about one method spec.

    Accuracy is pass@1 averaged: the mean over problems of each problem's mean
    score over its samples, so a problem run 4 times weighs as much as one run
    once (an interrupted eval leaves uneven sample counts; per-run averaging
    would then over-weight the problems that happened to finish).

    ``mean_ttc`` is per *run* (one attempt at one problem), which is the
    paper's "effective TTC per problem": the compute one answer costs.
    ``wall_s`` is the whole method phase's elapsed time as the harness measured
    it (runs overlap when they are concurrent, so it is not the sum of
    ``mean_wall_s``); ``None`` when the harness did not pass it in.
    """

    method: str
    family: str
    runs: int
    problems: int
    samples: int
    accuracy: float
    ci95: tuple[float, float]
    mean_ttc: float
    failures: int
    failed_trajectories: int
    truncations: int
    unparsed: int
    mean_wall_s: float
    wall_s: float | None = None


# --------------------------------------------------------------------------- intervals


def wilson_interval(proportion: float, n: int, *, z: float = CI_Z) -> tuple[float, float]:
    """Wilson score interval for a proportion observed over ``n`` trials.

    Chosen over the normal (Wald) interval because evals here are small and
    accuracies often sit near 0 or 1, where Wald collapses to a zero-width
    interval (0/10 -> [0, 0]) and Wilson stays honest (0/10 -> [0, 0.28]).
    ``n == 0`` carries no information and gives ``(0.0, 1.0)``.
    """
    if n <= 0:
        return (0.0, 1.0)
    p = min(max(proportion, 0.0), 1.0)
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: Sequence[float], *, z: float = CI_Z) -> tuple[float, float]:
    """Normal interval ``mean ± z·sd/√P`` over per-problem means, clipped to [0, 1].

    With several samples per problem each problem's mean is a fraction, not a
    0/1 outcome, so the binomial model behind Wilson no longer fits; the
    between-problem spread (``sd`` with ddof=1) is what the uncertainty about
    "accuracy on problems like these" is made of. With fewer than two values
    there is no spread to measure and the interval is the uninformative
    ``(0.0, 1.0)`` rather than a division by zero or a false zero width.
    """
    count = len(values)
    if count < 2:
        return (0.0, 1.0)
    mean = math.fsum(values) / count
    var = math.fsum((v - mean) ** 2 for v in values) / (count - 1)
    half = z * math.sqrt(var) / math.sqrt(count)
    return (max(0.0, mean - half), min(1.0, mean + half))


# --------------------------------------------------------------------------- summary


def _int(line: Mapping[str, Any], key: str) -> int:
    value = line.get(key)
    return int(value) if value is not None else 0


def _float(line: Mapping[str, Any], key: str) -> float:
    value = line.get(key)
    return float(value) if value is not None else 0.0


def _failed(line: Mapping[str, Any]) -> bool:
    # null and "" both mean "no error": the harness writes null, hand-edited files may not.
    return bool(line.get("error"))


def _score(line: Mapping[str, Any]) -> float:
    # A failed run scores 0 whatever its line says: its answer, if any, is not a result.
    return 0.0 if _failed(line) else _float(line, "score")


def _stats_for(method: str, runs: Sequence[Mapping[str, Any]], wall_s: float | None) -> MethodStats:
    by_problem: dict[str, list[float]] = {}
    for line in runs:
        by_problem.setdefault(str(line["problem_id"]), []).append(_score(line))
    problem_means = [math.fsum(scores) / len(scores) for scores in by_problem.values()]
    samples = max(len(scores) for scores in by_problem.values())
    accuracy = math.fsum(problem_means) / len(problem_means)
    if samples == 1:
        ci95 = wilson_interval(accuracy, len(problem_means))
    else:
        ci95 = mean_interval(problem_means)
    family = runs[-1].get("family") or method.split(":", 1)[0]
    return MethodStats(
        method=method,
        family=str(family),
        runs=len(runs),
        problems=len(by_problem),
        samples=samples,
        accuracy=accuracy,
        ci95=ci95,
        mean_ttc=math.fsum(_float(line, "effective_ttc") for line in runs) / len(runs),
        failures=sum(1 for line in runs if _failed(line)),
        failed_trajectories=sum(_int(line, "failed_trajectories") for line in runs),
        truncations=sum(_int(line, "truncations") for line in runs),
        unparsed=sum(1 for line in runs if line.get("parsed", True) is False and not _failed(line)),
        mean_wall_s=math.fsum(_float(line, "wall_s") for line in runs) / len(runs),
        wall_s=None if wall_s is None else float(wall_s),
    )


def summarize(
    lines: Iterable[Mapping[str, Any]],
    *,
    wall_s: Mapping[str, float] | None = None,
    method_order: Sequence[str] | None = None,
) -> dict[str, MethodStats]:
    """Per-method statistics from result lines, keyed by method spec as typed.

    A resumed eval may write the same (method, problem, sample) again; the
    LAST line wins, because it is the run that completed after the resume.

    The order is ``method_order`` (the ``--methods`` list) when given, with any
    method found in the lines but not listed appended in first-seen order;
    otherwise first-seen order. A method with no lines has no statistics and
    is left out (accuracy 0 at TTC 0 would be a fabricated point).

    ``wall_s`` maps a method spec to its phase's elapsed seconds; methods
    missing from it get ``wall_s=None``. Raises ``ValueError`` for a line
    without ``method`` or ``problem_id``: that is a harness bug, not a result.
    """
    latest: dict[str, dict[tuple[str, int], Mapping[str, Any]]] = {}
    for index, line in enumerate(lines):
        if line.get("method") is None or line.get("problem_id") is None:
            raise ValueError(f"result line {index} has no 'method' or 'problem_id': {line!r}")
        method = str(line["method"])
        key = (str(line["problem_id"]), _int(line, "sample"))
        latest.setdefault(method, {})[key] = line

    ordered: list[str] = []
    if method_order is not None:
        ordered = [m for m in dict.fromkeys(method_order) if m in latest]
    ordered += [m for m in latest if m not in ordered]

    walls = wall_s or {}
    return {m: _stats_for(m, list(latest[m].values()), walls.get(m)) for m in ordered}


# --------------------------------------------------------------------------- reports


def report_json(stats: Mapping[str, MethodStats], *, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The ``report.json`` object: ``{"methods": {spec: {...}}, **meta}``.

    ``meta`` (dataset, model, grader, ...) sits at the top level so a script
    reads ``report["model"]`` directly; it may therefore not use the key
    ``methods`` (``ValueError``).
    """
    if "methods" in meta:
        raise ValueError("meta may not contain the key 'methods': it holds the per-method table")
    methods = {
        name: {
            "accuracy": s.accuracy,
            "ci95": [s.ci95[0], s.ci95[1]],
            "mean_ttc": s.mean_ttc,
            "runs": s.runs,
            "problems": s.problems,
            "samples": s.samples,
            "failures": s.failures,
            "failed_trajectories": s.failed_trajectories,
            "truncations": s.truncations,
            "unparsed": s.unparsed,
            "mean_wall_s": s.mean_wall_s,
            "wall_s": s.wall_s,
            "family": s.family,
        }
        for name, s in stats.items()
    }
    return {"methods": methods, **meta}


def _cell(text: str) -> str:
    # A method spec or meta value with a pipe would split the Markdown row.
    return text.replace("|", "\\|").replace("\n", " ")


def _meta_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _percent(value: float) -> str:
    return f"{100.0 * value:.1f}"


def dataset_label(path: str | Path, *, cwd: str | Path | None = None) -> str:
    """How a report names its dataset: a path that means the same on another machine.

    ``report.md`` is committed and shared, so an absolute path of the machine it
    was made on (``/tmp/realeval/easy100.jsonl``) tells a reader nothing and
    leaks a home directory. A path inside the working directory is written
    relative to it; any other path is reduced to its file name.
    """
    given = Path(path)
    if not given.is_absolute():
        return given.as_posix()
    base = Path(cwd) if cwd is not None else Path.cwd()
    try:
        return given.relative_to(base.resolve()).as_posix()
    except ValueError:
        return given.name


def report_markdown(stats: Mapping[str, MethodStats], *, meta: Mapping[str, Any]) -> str:
    """``report.md``: a title, ``meta`` as a list, one table row per method.

    The dataset is named by :func:`dataset_label` (``report.json`` keeps the
    path as given): the Markdown is what gets pasted and committed. The
    judge's ``judge_tokens`` and ``judge_verdicts`` (numbers in ``report.json``)
    are one sentence here, saying they are not in any method's TTC.

    Accuracy is a percentage with one decimal and its 95% interval; failures
    count whole runs that errored, with the failed trajectories (of all runs)
    in parentheses when there are any: a PaCoRe run survives losing some of
    its K explorers, and that loss should still be visible. The notes under the table
    say how the numbers were computed, so the file stands on its own when
    pasted elsewhere.
    """
    out = ["# Evaluation report", ""]
    shown = {**meta, **({"dataset": dataset_label(meta["dataset"])} if meta.get("dataset") else {})}
    if "judge_tokens" in shown and "judge_verdicts" in shown:
        verdicts = shown.pop("judge_verdicts")
        shown["judge_tokens"] = (
            f"{shown['judge_tokens']} over {verdicts} verdicts (not in effective TTC)"
        )
    out += [f"- **{_cell(str(k))}**: {_cell(_meta_value(v))}" for k, v in shown.items()]
    if meta:
        out.append("")
    out += [
        "| method | accuracy (95% CI) | mean effective TTC | runs | failures | truncated "
        "| unparsed | wall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in stats.items():
        accuracy = f"{_percent(s.accuracy)}% ({_percent(s.ci95[0])}–{_percent(s.ci95[1])})"
        failures = str(s.failures)
        if s.failed_trajectories:
            failures += f" ({s.failed_trajectories} traj.)"
        runs = f"{s.runs} ({s.problems}×{s.samples})"
        row = [
            _cell(name),
            accuracy,
            f"{s.mean_ttc:,.0f}",
            runs,
            failures,
            str(s.truncations),
            str(s.unparsed),
            _duration(s.wall_s),
        ]
        out.append("| " + " | ".join(row) + " |")
    if not stats:
        out += ["", "No results."]
    out += [
        "",
        "Accuracy is pass@1 averaged over each problem's samples, then over problems. "
        "The 95% CI is a Wilson interval over problems with one sample per problem, "
        "else mean ± 1.96·sd/√problems over per-problem means, clipped to [0, 100]. "
        "Mean effective TTC is completion tokens of all trajectories per run. "
        "Runs are shown as total (problems×samples); wall is the method's elapsed time.",
        "",
    ]
    return "\n".join(out)


def write_report(
    out_dir: Path, stats: Mapping[str, MethodStats], meta: Mapping[str, Any]
) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` into ``out_dir``; return their paths.

    Each file appears complete or not at all (written beside, then renamed), so
    re-running the report after a resume simply replaces both.
    """
    out_dir = Path(out_dir)
    private_dir(out_dir)
    json_path = out_dir / "report.json"
    md_path = out_dir / "report.md"
    payload = json.dumps(report_json(stats, meta=meta), indent=2, ensure_ascii=False)
    write_text_atomic(json_path, payload + "\n")
    write_text_atomic(md_path, report_markdown(stats, meta=meta))
    return json_path, md_path
