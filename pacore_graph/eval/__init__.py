"""Evaluation: PaCoRe against its baselines at matched compute.

- :mod:`~pacore_graph.eval.graders`: graders share one protocol and never raise.
- :mod:`~pacore_graph.eval.datasets`: JSONL in the ``pacore run`` format,
  generated reproducibly from a seed or shipped with the package.
- :mod:`~pacore_graph.eval.methods`: method specs (``pacore:high``,
  ``majority:16``, ...) and their graphs.
- :mod:`~pacore_graph.eval.harness`: ``pacore eval``: run, grade, resume.
- :mod:`~pacore_graph.eval.report` / :mod:`~pacore_graph.eval.plot`: the
  report and the test-time-scaling plot.
"""

from __future__ import annotations

from pacore_graph.eval.datasets import (
    ARITHMETIC_OPS,
    DATASET_KINDS,
    DEFAULT_MODULUS,
    EASY_ARITHMETIC_OPS,
    arithmetic_problems,
    easy_arithmetic_problems,
    generate_dataset,
    load_jsonl,
    sample_questions_path,
    write_jsonl,
)
from pacore_graph.eval.graders import (
    CallableGrader,
    ChoiceGrader,
    ExactGrader,
    Grade,
    Grader,
    GradingTimeoutError,
    MathGrader,
    NumericGrader,
    auto_grader,
    grader_from_name,
    ground_truth_answer,
)
from pacore_graph.eval.harness import EvalOutcome, completed_runs, run_eval
from pacore_graph.eval.methods import (
    FAMILIES,
    MethodSpec,
    build_method_graph,
    parse_method,
    parse_methods,
)
from pacore_graph.eval.plot import MIN_PLOT_TTC, plot_scaling
from pacore_graph.eval.report import (
    CI_Z,
    MethodStats,
    mean_interval,
    report_json,
    report_markdown,
    summarize,
    wilson_interval,
    write_report,
)

__all__ = [
    "ARITHMETIC_OPS",
    "CI_Z",
    "DATASET_KINDS",
    "DEFAULT_MODULUS",
    "EASY_ARITHMETIC_OPS",
    "FAMILIES",
    "MIN_PLOT_TTC",
    "CallableGrader",
    "ChoiceGrader",
    "EvalOutcome",
    "ExactGrader",
    "Grade",
    "Grader",
    "GradingTimeoutError",
    "MathGrader",
    "MethodSpec",
    "MethodStats",
    "NumericGrader",
    "arithmetic_problems",
    "auto_grader",
    "build_method_graph",
    "completed_runs",
    "easy_arithmetic_problems",
    "generate_dataset",
    "grader_from_name",
    "ground_truth_answer",
    "load_jsonl",
    "mean_interval",
    "parse_method",
    "parse_methods",
    "plot_scaling",
    "report_json",
    "report_markdown",
    "run_eval",
    "sample_questions_path",
    "summarize",
    "wilson_interval",
    "write_jsonl",
    "write_report",
]
