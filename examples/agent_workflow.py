"""An agent workflow around PaCoRe: planner -> PaCoRe -> human review -> verifier.

What a LangGraph developer's own graph needs from PaCoRe, in one run:

- **a SQLite saver**: the workflow's threads (PaCoRe's rounds included) survive a restart;
  PaCoRe's records are registered with the saver's serializer (``pacore_serde``);
- **its own context**: the planner samples at the workflow's ``temperature`` (0.0), while
  PaCoRe reads only the context's ``pacore`` settings;
- **streaming**: progress events of every round and the answer's tokens as they come;
- **a failed round resumed**: the model goes down during round 1; the run fails with
  ``RoundFailedError``; once the model is back, ``astream(None, ...)`` asks again only for
  what failed (round 0 is not asked again);
- **interrupt and resume**: the review node pauses with ``interrupt()``;
  ``Command(resume=...)`` goes on to the verifier.

    python examples/agent_workflow.py                                    # embedded model
    python examples/agent_workflow.py --base-url http://localhost:8000/v1 --model qwen3-4b
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessageChunk, HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from pacore_graph import (
    Completion,
    ModelCallError,
    OpenAICompatClient,
    PaCoReConfig,
    RoundFailedError,
    SamplingParams,
    UpstreamStatusError,
    build_pacore_graph,
    pacore_serde,
)
from pacore_graph.embedded import model_endpoint


class FlakyModel(OpenAICompatClient):
    """The model behind a switch, to show a failed round resumed (a real outage needs none).

    While ``down``, synthesis rounds (round 1 and on) get HTTP 503; it counts the calls.
    A subclass of the shipped client hooks its two ways to the server: ``complete_each``
    (``complete``, the batcher's view, goes through it) and ``stream`` (the final answer).
    """

    down: bool = False
    calls: int = 0

    def _check(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.calls += 1
        if self.down and "Reference Responses" in str(messages[-1].get("content")):
            raise UpstreamStatusError("HTTP 503: the model is restarting", status=503)

    async def complete_each(
        self, messages: Sequence[Mapping[str, Any]], **kwargs: Any
    ) -> list[Completion | ModelCallError]:
        self._check(messages)
        return await super().complete_each(messages, **kwargs)

    async def stream(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Completion:
        self._check(messages)
        return await super().stream(messages, **kwargs)


@dataclasses.dataclass(slots=True)
class AppContext:
    """The workflow's own run settings; PaCoRe's are under ``pacore``."""

    temperature: float = 0.0
    pacore: dict[str, Any] | None = None


class Workflow(MessagesState):
    plan: str
    review: str
    verdict: str


def build_workflow(model: FlakyModel, max_tokens: int) -> StateGraph:
    pacore = build_pacore_graph(
        model, config=PaCoReConfig(rounds=[3, 2], sampling=SamplingParams(max_tokens=max_tokens))
    )

    async def planner(state: Workflow, runtime: Runtime[AppContext]) -> dict[str, Any]:
        question = str(state["messages"][-1].content)
        params = SamplingParams(temperature=runtime.context.temperature, max_tokens=max_tokens)
        (plan,) = await model.complete(
            [{"role": "user", "content": f"In one line, how would you solve: {question}"}],
            params=params,
        )
        first_line = (plan.content.strip().splitlines() or [""])[0]
        return {"plan": first_line, "messages": [HumanMessage(f"{question}\n(Plan: {first_line})")]}

    async def review(state: Workflow) -> dict[str, Any]:
        decision = interrupt({"answer": state["messages"][-1].content, "plan": state["plan"]})
        return {"review": str(decision)}

    async def verifier(state: Workflow) -> dict[str, Any]:
        answer = str(state["messages"][-1].content)
        ok = state["review"] == "approve" and any(ch.isdigit() for ch in answer)
        return {"verdict": "accepted" if ok else "sent back"}

    graph = StateGraph(Workflow, context_schema=AppContext)
    graph.add_node("planner", planner)
    graph.add_node("pacore", pacore)  # the whole PaCoRe graph is one node
    graph.add_node("review", review)
    graph.add_node("verifier", verifier)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "pacore")
    graph.add_edge("pacore", "review")
    graph.add_edge("review", "verifier")
    graph.add_edge("verifier", END)
    return graph


async def stream(app: Any, given: Any, config: Any, context: AppContext) -> dict[str, Any]:
    """Run (or resume) the workflow, printing progress and the answer's tokens as they come."""
    interrupted: dict[str, Any] = {}
    modes = ["custom", "messages", "updates"]
    async for _, mode, chunk in app.astream(
        given, config, context=context, stream_mode=modes, subgraphs=True
    ):
        if mode == "custom" and chunk.get("event") == "round_compacted":
            print(f"  round {chunk['round']}: {chunk['messages']} messages passed on")
        elif mode == "messages" and isinstance(chunk[0], AIMessageChunk) and chunk[0].content:
            print(chunk[0].content, end="", flush=True)
        elif mode == "updates" and "__interrupt__" in chunk:
            interrupted = chunk["__interrupt__"][0].value
    return interrupted


async def main(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="pacore-workflow-"))
    async with (
        model_endpoint(args.base_url, args.model) as (base_url, model_name),
        AsyncSqliteSaver.from_conn_string(str(workdir / "threads.sqlite")) as saver,
        FlakyModel(base_url, model_name) as model,  # closes its HTTP session on the way out
    ):
        saver.serde = pacore_serde()  # PaCoRe's records in the workflow's checkpoints
        app = build_workflow(model, args.max_tokens).compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "workflow-1"}}
        context = AppContext(temperature=0.0, pacore={"temperature": 0.8})
        question = {"messages": [HumanMessage(args.question)]}
        try:
            model.down = True  # the model goes down during the run
            print("run 1 (the model goes down after round 0):")
            await stream(app, question, config, context)
        except RoundFailedError as exc:
            print(f"  failed: {str(exc).splitlines()[0][:80]}")
        finally:
            model.down = False
        before = model.calls
        print("run 2 (the model is back): resume the thread")
        paused = await stream(app, None, config, context)
        print(f"\n  asked again: {model.calls - before} calls (round 0 was not asked again)")
        print(f"  paused for review: plan={paused['plan']!r}")
        await stream(app, Command(resume="approve"), config, context)
        state = (await app.aget_state(config)).values
    print(f"\nverdict: {state['verdict']}")
    print(f"answer: {str(state['messages'][-1].content).strip()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What is 17 + 25?")
    parser.add_argument("--base-url", help="an OpenAI-compatible /v1 URL (default: embedded)")
    parser.add_argument("--model", help="the served model")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--workdir", help="the SQLite threads file's folder (default: a temp dir)")
    asyncio.run(main(parser.parse_args()))
