"""RL adapter: PaCoRe runs as training data, and TRL training on it.

One PaCoRe round is an episodic RL environment (the paper's training set-up):
the state is the synthesis input P(x, M), the action one trajectory, the
reward the verified score of its compacted message. This package turns runs
into that data and trains on it:

- :mod:`~pacore_graph.rl.episodes`: the frozen, versioned :class:`Episode`
  record, rebuilt from ``pacore run`` / ``pacore eval`` result lines, or
  from the results a graph returned (:func:`episodes_from_results`);
- :mod:`~pacore_graph.rl.export`: ``pacore export-episodes`` (JSONL, Parquet,
  or a ``datasets`` folder);
- :mod:`~pacore_graph.rl.pool`: cached message pools, from PaCoRe-Train
  records or this project's results;
- :mod:`~pacore_graph.rl.recipe`: ``pacore trainset``, the paper's
  message-pool recipe (|M| ~ U(16, 24), stage-1 and stage-2 filters);
- :mod:`~pacore_graph.rl.rewards`: the reward function TRL calls;
- :mod:`~pacore_graph.rl.train`: ``pacore train`` with TRL's GRPO or RLOO;
- :mod:`~pacore_graph.rl.tiny`: a tiny offline model for tests and examples.

Only the standard library and this project's core are needed to import it and
to build episodes; torch, transformers, TRL and ``datasets`` are imported
when a function needs them (``pip install 'pacore-graph[rl]'``). Names are
loaded lazily (PEP 562), so ``import pacore_graph.rl`` stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from pacore_graph.errors import PaCoReError
from pacore_graph.lazy import lazy_getattr

if TYPE_CHECKING:
    from pacore_graph.rl.episodes import (
        EPISODE_SCHEMA_VERSION,
        Episode,
        ResultRun,
        SkippedLine,
        episodes_from_results,
        episodes_from_run,
        read_result_runs,
        rebuild_prompts,
    )
    from pacore_graph.rl.export import (
        EXPORT_FORMATS,
        ExportReport,
        export_command,
        export_episodes,
        load_episode_dataset,
    )
    from pacore_graph.rl.pool import PoolProblem, load_pool, pool_from_results, read_pacore_train
    from pacore_graph.rl.recipe import (
        DEFAULT_THRESHOLDS,
        ProblemStats,
        RecipeConfig,
        TrainsetReport,
        TrainsetResult,
        build_trainset,
        build_trainset_command,
        load_synthesis_scores,
        write_trainset,
    )
    from pacore_graph.rl.rewards import (
        PaCoReReward,
        completion_trajectory,
        decode_ground_truth,
        encode_ground_truth,
    )
    from pacore_graph.rl.tiny import (
        TinyModelSpec,
        build_tiny_model,
        find_smollm2_gguf,
        load_gguf_tokenizer,
    )
    from pacore_graph.rl.train import (
        ALGOS,
        TrainOutcome,
        TrainSettings,
        build_trainer,
        load_training_dataset,
        prompts_from_episodes,
        train_command,
    )

__all__ = [
    "ALGOS",
    "DEFAULT_THRESHOLDS",
    "EPISODE_SCHEMA_VERSION",
    "EXPORT_FORMATS",
    "INSTALL_HINT",
    "Episode",
    "ExportReport",
    "PaCoReReward",
    "PoolProblem",
    "ProblemStats",
    "RLDependencyError",
    "RecipeConfig",
    "ResultRun",
    "SkippedLine",
    "TinyModelSpec",
    "TrainOutcome",
    "TrainSettings",
    "TrainsetReport",
    "TrainsetResult",
    "build_tiny_model",
    "build_trainer",
    "build_trainset",
    "build_trainset_command",
    "completion_trajectory",
    "decode_ground_truth",
    "encode_ground_truth",
    "episodes_from_results",
    "episodes_from_run",
    "export_command",
    "export_episodes",
    "find_smollm2_gguf",
    "load_episode_dataset",
    "load_gguf_tokenizer",
    "load_pool",
    "load_synthesis_scores",
    "load_training_dataset",
    "pool_from_results",
    "prompts_from_episodes",
    "read_pacore_train",
    "read_result_runs",
    "rebuild_prompts",
    "require_rl",
    "train_command",
    "write_trainset",
]

#: What to tell a user who lacks the training dependencies. torch comes first
#: and pinned: an unpinned torch from PyPI resolves to a multi-GB CUDA build.
INSTALL_HINT = (
    "pip install 'pacore-graph[rl]' (on a CPU-only machine install the CPU torch "
    "first, e.g. pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)"
)

# import name -> distribution name, for the error message
_DISTRIBUTIONS = {
    "torch": "torch",
    "transformers": "transformers",
    "trl": "trl",
    "datasets": "datasets",
    "accelerate": "accelerate",
    "pyarrow": "pyarrow",
    "gguf": "gguf",
}


class RLDependencyError(PaCoReError, ImportError):
    """A training dependency (the ``[rl]`` extra) is not installed."""


def require_rl(*modules: str) -> None:
    """Raise :class:`RLDependencyError` naming every missing module and the install line.

    Called at the top of each function that needs a heavy dependency, so the
    error names all that is missing at once instead of one per attempt.
    """
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        names = ", ".join(_DISTRIBUTIONS.get(m, m) for m in missing)
        raise RLDependencyError(
            f"this needs {names}, which {'is' if len(missing) == 1 else 'are'} not "
            f"installed; {INSTALL_HINT}"
        )


_LAZY = {
    "EPISODE_SCHEMA_VERSION": "episodes",
    "Episode": "episodes",
    "ResultRun": "episodes",
    "SkippedLine": "episodes",
    "episodes_from_results": "episodes",
    "episodes_from_run": "episodes",
    "read_result_runs": "episodes",
    "rebuild_prompts": "episodes",
    "EXPORT_FORMATS": "export",
    "ExportReport": "export",
    "export_command": "export",
    "export_episodes": "export",
    "load_episode_dataset": "export",
    "DEFAULT_THRESHOLDS": "recipe",
    "PoolProblem": "pool",
    "ProblemStats": "recipe",
    "RecipeConfig": "recipe",
    "TrainsetReport": "recipe",
    "TrainsetResult": "recipe",
    "build_trainset": "recipe",
    "build_trainset_command": "recipe",
    "load_pool": "pool",
    "load_synthesis_scores": "recipe",
    "pool_from_results": "pool",
    "read_pacore_train": "pool",
    "write_trainset": "recipe",
    "PaCoReReward": "rewards",
    "completion_trajectory": "rewards",
    "decode_ground_truth": "rewards",
    "encode_ground_truth": "rewards",
    "TinyModelSpec": "tiny",
    "build_tiny_model": "tiny",
    "find_smollm2_gguf": "tiny",
    "load_gguf_tokenizer": "tiny",
    "ALGOS": "train",
    "TrainOutcome": "train",
    "TrainSettings": "train",
    "build_trainer": "train",
    "load_training_dataset": "train",
    "prompts_from_episodes": "train",
    "train_command": "train",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
