"""The paper's RL recipe as a ``verifiers`` environment (prime-rl's format).

PaCoRe trains the synthesis step: an episode is one synthesis prompt
P(x, M) (the problem and a set of cached messages M), the model answers once,
and the reward is sparse and terminal: the answer's compacted message graded
against the ground truth. That is a single-turn environment, and
``verifiers`` (``pip install 'pacore-graph[verifiers]'``) is where prime-rl,
and RSA's authors (RSAgent), train such environments.

:func:`load_environment` returns one. Its prompts are the rows ``pacore
train`` trains on (:func:`~pacore_graph.rl.train.load_training_dataset`):
a ``pacore trainset`` output or a ``pacore export-episodes`` export
(``path``), or built here, as ``pacore trainset`` builds them, from PaCoRe-Train
files or results files holding a dataset and its message pool (``pool``,
:func:`~pacore_graph.rl.recipe.build_trainset` with the paper's curriculum
filter and |M| range). Its reward is the one ``pacore train`` gives
(:class:`~pacore_graph.rl.rewards.PaCoReReward`): the completion compacted
(``conclusion`` by default), then graded by our graders: by the row's
category (math; code in the sandbox; a judge when one is configured) or by
the ``grader`` named.

It is built from verifiers 0.4's parts (read from its source: the package
changes fast):

- :class:`PaCoReSynthesisTaskset` yields one :class:`PaCoReSynthesisTask` per
  prompt; the task's ``@vf.reward`` grades the trace's last reply;
- :class:`PaCoReSynthesisHarness` is the agent's program: one chat call,
  in-process, through the rollout's interception endpoint (so verifiers
  records it in the trace as it records any harness's calls), no tools, no
  sandbox to provision;
- the environment is verifiers' ``SingleAgentEnv`` over them, on the local
  ``subprocess`` runtime.

verifiers finds a taskset by a top-level module name (``vf.load_taskset``
imports the id; a dotted id fails in its loader), so importing this module
also registers it under :data:`TASKSET_ID`.

Evaluate with verifiers' own loop: ``async with env.serving():`` then
``await env.run_slot(vf.RunSlot(task), vf.ModelContext(model=...,
client=vf.EvalClientConfig(base_url=...)))`` for each task of
``env.taskset``; :func:`evaluate` does that for a few tasks.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import verifiers.v1 as vf
from openai import AsyncOpenAI
from pydantic import Field
from verifiers.v1.configs.harness import HarnessConfig
from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig

from pacore_graph.eval.graders import Grade, Grader, auto_grader, grade_response
from pacore_graph.rl.rewards import PaCoReReward, decode_ground_truth
from pacore_graph.values.answers import problem_text
from pacore_graph.values.compaction import DEFAULT_COMPACTOR

__all__ = [
    "TASKSET_ID",
    "PaCoReSynthesisConfig",
    "PaCoReSynthesisData",
    "PaCoReSynthesisHarness",
    "PaCoReSynthesisTask",
    "PaCoReSynthesisTaskConfig",
    "PaCoReSynthesisTaskset",
    "evaluate",
    "load_environment",
]

#: The id verifiers loads this taskset (and its harness) by.
TASKSET_ID = "pacore_synthesis"


class PaCoReSynthesisData(vf.TaskData):
    """One synthesis prompt and what grades its answer (a training row's columns)."""

    ground_truth: str
    """JSON text, as training rows carry it (``encode_ground_truth``)."""
    problem_id: str
    category: str | None = None


class PaCoReSynthesisTaskConfig(vf.TaskConfig):
    """How an answer is graded (``--env.taskset.task.*``); the defaults are ``pacore train``'s.

    ``grader``: None grades by the row's category (math, code in the
    sandbox, a judge when ``judge_base_url`` and ``judge_model`` are set, its
    key from ``PACORE_JUDGE_API_KEY``); a name (``math``, ``code``,
    ``judge``, ``choice`` ..., or ``module:function``) grades every row.
    """

    grader: str | None = None
    compactor: str = DEFAULT_COMPACTOR
    grader_workers: int = 2
    judge_base_url: str | None = None
    judge_model: str | None = None
    judge_rubric: str = "auto"


class PaCoReSynthesisConfig(vf.TasksetConfig):
    """Where the prompts come from (``--env.taskset.*``): ``path`` or ``pool``, not both.

    ``path``: a ``pacore trainset`` output or an episode export (folder or
    file); ``min_round`` as for ``pacore train`` (1: synthesis prompts only).
    ``pool``: PaCoRe-Train or results files, built into prompts with the
    recipe's knobs (``min_messages``..``max_messages`` references per prompt,
    ``prompts_per_problem``, ``seed``, ``stage1`` filter).
    """

    id: str = TASKSET_ID
    task: PaCoReSynthesisTaskConfig = PaCoReSynthesisTaskConfig()
    path: str | None = None
    min_round: int = 1
    pool: list[str] = Field(default_factory=list)
    min_messages: int = 16
    max_messages: int = 24
    prompts_per_problem: int = 1
    seed: int = 0
    stage1: bool = True
    compactor: str = DEFAULT_COMPACTOR


def _grader(name: str | None, config: PaCoReSynthesisTaskConfig) -> Grader | None:
    """The grader ``name`` asks for, built with the config's code and judge settings."""
    from pacore_graph.eval.code_grader import CodeGrader
    from pacore_graph.eval.graders import grader_from_name

    if name is None:
        return None
    if name == "code":
        return CodeGrader(workers=config.grader_workers)
    if name == "judge":
        import os

        from pacore_graph.eval.judge import JudgeGrader

        if not (config.judge_base_url and config.judge_model):
            raise ValueError("grader 'judge' needs judge_base_url and judge_model")
        return JudgeGrader(
            config.judge_base_url,
            config.judge_model,
            api_key=os.environ.get("PACORE_JUDGE_API_KEY") or None,
            rubric=config.judge_rubric,
        )
    return grader_from_name(name)


@functools.lru_cache(maxsize=8)
def _grading(config_json: str) -> tuple[PaCoReReward, Grader | None, dict[str, Grader]]:
    """The reward's parts for one task config, built once (graders hold workers and caches)."""
    from pacore_graph.eval.code_grader import CodeGrader
    from pacore_graph.eval.graders import CodeOrAnswerGrader

    config = PaCoReSynthesisTaskConfig.model_validate_json(config_json)
    by_category: dict[str, Grader] = {
        "code": CodeOrAnswerGrader(CodeGrader(workers=config.grader_workers))
    }
    if config.judge_base_url and config.judge_model:
        judge = _grader("judge", config)
        assert judge is not None
        by_category["judge"] = judge
    return PaCoReReward(compactor=config.compactor), _grader(config.grader, config), by_category


def grade_completion(
    completion: Mapping[str, Any], data: PaCoReSynthesisData, config: PaCoReSynthesisTaskConfig
) -> Grade:
    """Grade one answer as ``pacore train``'s reward does: compact, then the grader."""
    reward, explicit, by_category = _grading(config.model_dump_json())
    category = (data.category or "").strip().lower()
    grader = explicit or by_category.get(category) or auto_grader(data.category)
    prompt = [m.model_dump() for m in data.prompt] if isinstance(data.prompt, list) else data.prompt
    return grade_response(
        grader,
        reward.message([dict(completion)]),
        decode_ground_truth(data.ground_truth),
        problem_text(prompt),
    )


class PaCoReSynthesisTask(vf.Task[PaCoReSynthesisData, Any, PaCoReSynthesisTaskConfig]):
    """One synthesis episode; its reward is the graded compacted answer, in [0, 1]."""

    @vf.reward(weight=1.0)
    async def pacore_reward(self, trace: vf.Trace) -> float:
        replies = trace.assistant_messages
        last = replies[-1] if replies else None
        completion = {
            "role": "assistant",
            "content": (last.content if last is not None else "") or "",
            "reasoning_content": last.reasoning_content if last is not None else None,
        }
        # Graders may run sandboxed programs or call a judge: off the event loop.
        grade = await asyncio.to_thread(grade_completion, completion, self.data, self.config)
        return float(grade.score)


def _rows(config: PaCoReSynthesisConfig) -> Iterable[Mapping[str, Any]]:
    """The training rows ``config`` names, as ``pacore train`` would read or build them."""
    if bool(config.path) == bool(config.pool):
        raise ValueError("give the prompts as path=TRAINSET_OR_EPISODES or pool=[FILES], one")
    if config.path:
        from pacore_graph.rl.train import load_training_dataset

        return load_training_dataset(config.path, min_round=config.min_round)
    from pacore_graph.rl.recipe import RecipeConfig, build_trainset, load_pool

    recipe = RecipeConfig(
        min_messages=config.min_messages,
        max_messages=config.max_messages,
        prompts_per_problem=config.prompts_per_problem,
        seed=config.seed,
        stage1=config.stage1,
        compactor=config.compactor,
    )
    problems = load_pool(list(config.pool), compactor=config.compactor)
    return build_trainset(problems, recipe).rows


class PaCoReSynthesisTaskset(vf.Taskset[PaCoReSynthesisTask, PaCoReSynthesisConfig]):
    """The synthesis prompts of a trainset, an episode export or a pool (see the config)."""

    def load(self) -> list[PaCoReSynthesisTask]:
        tasks = []
        for row in _rows(self.config):
            prompt = row["prompt"]
            data = PaCoReSynthesisData(
                id=str(row.get("prompt_id") or row.get("episode_id") or row["problem_id"]),
                prompt=[{"role": m["role"], "content": m["content"]} for m in prompt],
                ground_truth=str(row["ground_truth"]),
                problem_id=str(row["problem_id"]),
                category=row.get("category"),
            )
            tasks.append(PaCoReSynthesisTask(data, self.config.task))
        return tasks


class PaCoReSynthesisHarness(vf.Harness[HarnessConfig]):
    """One chat call on the prompt, in-process, through the rollout's interception endpoint.

    verifiers allows a harness to run its loop in-process "as long as every
    model call goes through endpoint + secret"; the call is then in the trace
    as any program's would be. No tools and no code run, so no sandbox.
    """

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        tool_interception_url: str | None = None,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages.extend(m.model_dump(exclude_none=True) for m in prompt or [])
        client = AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0)
        try:
            await client.chat.completions.create(model=ctx.model, messages=messages)  # type: ignore[arg-type]
        finally:
            await client.close()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def load_environment(
    path: str | None = None,
    *,
    pool: Sequence[str] = (),
    grader: str | None = None,
    compactor: str = DEFAULT_COMPACTOR,
    min_round: int = 1,
    **settings: Any,
) -> SingleAgentEnv:
    """A ``verifiers`` environment of synthesis prompts with our graders as its reward.

    ``path`` (a trainset or an episode export) or ``pool`` (PaCoRe-Train or
    results files) gives the prompts; ``grader`` and ``compactor`` the
    reward (see :class:`PaCoReSynthesisTaskConfig`); further ``settings``
    are the config's fields (``min_messages``, ``seed``, ``judge_model`` ...).
    Raises ValueError for a bad combination before any model call.
    """
    task_fields = set(PaCoReSynthesisTaskConfig.model_fields) - set(vf.TaskConfig.model_fields)
    task_settings = {k: settings.pop(k) for k in list(settings) if k in task_fields}
    taskset = PaCoReSynthesisConfig(
        path=str(path) if path is not None else None,
        pool=[str(p) for p in pool],
        min_round=min_round,
        compactor=compactor,
        task=PaCoReSynthesisTaskConfig(grader=grader, compactor=compactor, **task_settings),
        **settings,
    )
    _grading(taskset.task.model_dump_json())  # a bad grader name fails here, not per rollout
    config = SingleAgentEnvConfig(
        taskset=taskset,
        agent=vf.AgentConfig(harness=HarnessConfig(id=TASKSET_ID), runtime=vf.SubprocessConfig()),
    )
    return SingleAgentEnv(config)


async def evaluate(
    env: SingleAgentEnv,
    *,
    base_url: str,
    model: str,
    limit: int | None = None,
    rollouts: int = 1,
    sampling: Mapping[str, Any] | None = None,
    api_key_var: str = "OPENAI_API_KEY",
) -> list[vf.Episode]:
    """Run ``env``'s first ``limit`` tasks against an OpenAI-compatible server (verifiers' loop).

    The same steps as verifiers' ``eval`` command in-process, without its
    output folder and dashboard: serve the environment, run each task's
    slots concurrently, return the episodes (each trace's ``rewards`` hold
    ``pacore_reward``).
    """
    client = vf.EvalClientConfig(base_url=base_url, api_key_var=api_key_var)
    ctx = vf.ModelContext(
        model=model, client=client, sampling=vf.SamplingConfig(**dict(sampling or {}))
    )
    tasks = list(env.taskset.take(limit) if limit is not None else env.taskset)
    async with env.serving():
        slots = [slot for task in tasks for slot in env.slots(task, rollouts)]
        return list(await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots)))


def _register() -> None:
    """Make :data:`TASKSET_ID` import this module (verifiers' loader imports ids)."""
    sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


_register()
