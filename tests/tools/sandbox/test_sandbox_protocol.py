"""The backend protocol: any executor built on BaseCodeExecutor plugs in, sync or async."""

from __future__ import annotations

import asyncio

from sandbox_support import SMALL

from pacore_graph.tools.sandbox import (
    BaseCodeExecutor,
    CodeExecutor,
    ExecRequest,
    ExecResult,
)


def test_another_backend_plugs_in() -> None:
    class Echo(BaseCodeExecutor):
        def execute(self, request: ExecRequest) -> ExecResult:
            return ExecResult(
                stdout=request.code, stderr="", exit_code=0, duration_s=0, limits=SMALL
            )

    with Echo() as echo:
        assert isinstance(echo, CodeExecutor)
        assert asyncio.run(echo.aexecute(ExecRequest(code="hi"))).stdout == "hi"


class Recording(BaseCodeExecutor):
    """Answers with the request's code and records its lifecycle calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def execute(self, request: ExecRequest) -> ExecResult:
        self.calls.append(f"execute:{request.code}")
        return ExecResult(stdout=request.code, stderr="", exit_code=0, duration_s=0, limits=SMALL)

    def shutdown(self) -> None:
        self.calls.append("shutdown")


def test_with_starts_and_shuts_down_around_the_calls() -> None:
    backend = Recording()
    with backend as running:
        assert running is backend
        running.execute(ExecRequest(code="a"))
    assert backend.calls == ["start", "execute:a", "shutdown"]


async def test_async_with_and_aexecute_run_off_the_event_loop() -> None:
    backend = Recording()
    async with backend:
        results = await asyncio.gather(*(backend.aexecute(ExecRequest(code=c)) for c in "xyz"))
    assert [r.stdout for r in results] == ["x", "y", "z"]
    assert backend.calls[0] == "start" and backend.calls[-1] == "shutdown"
    assert sorted(backend.calls[1:-1]) == ["execute:x", "execute:y", "execute:z"]


def test_the_base_alone_is_a_code_executor_that_cannot_execute() -> None:
    base = BaseCodeExecutor()
    assert isinstance(base, CodeExecutor)
    base.start()
    base.shutdown()
    try:
        base.execute(ExecRequest(code="x"))
    except NotImplementedError:
        pass
    else:
        raise AssertionError("the base class must not pretend to run code")
