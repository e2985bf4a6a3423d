"""The error tree: one plain root, a kind per class, only the fields that apply, no patching.

Why these tests: ``errors.py`` promises that errors live "in one place"; the
walk below holds every public exception class of the package (and of
``graphs/`` and ``tools/``) to deriving from :class:`PaCoReError`, so
``except PaCoReError`` keeps meaning "anything pacore-graph raised on purpose",
to a builtin second base only where callers catch it so, and to pickling
(errors cross process boundaries with Ray and multiprocessing). The model-call
tree is held to a ``kind`` that is its class's (never an argument that could
disagree), to the fields each class carries, and to immutability: several
samples share one error object.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import multiprocessing
import pickle
import pkgutil
from concurrent.futures import ProcessPoolExecutor
from types import ModuleType
from typing import Any

import pytest

import graphs
import pacore_graph
import tools
from pacore_graph import errors
from pacore_graph.errors import ERROR_KINDS, ModelCallError, PaCoReError
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.transport import http_error, stream_error

#: Exception classes that may stay outside the tree, each with why.
OUTSIDE_THE_TREE = {
    # Not an error: the CLI turns it into exit status 143, and it must not be
    # caught by the CLI's ``except PaCoReError`` ("run failed") before that.
    "pacore_graph.cli.signals.Terminated",
    # ``tools/sandbox`` runs standalone, standard library only: the launcher
    # loads workspace_copy by file path (``python -I -S``), and the package is
    # copied and imported by another user's interpreter that cannot see
    # pacore_graph (tests/tools/sandbox/test_local.py::test_started_by_an_ordinary_user).
    "tools.sandbox.workspace_copy.WorkspaceTooLarge",
    "tools.sandbox.workspace_copy.WorkspaceTooDeep",
    "tools.sandbox.errors.SandboxError",
    "tools.sandbox.errors.SandboxUnavailableError",
    "tools.sandbox.errors.SandboxExecutionError",
}

#: Modules that cannot be imported in a test process (a script run as a child).
UNIMPORTABLE = {"tools.sandbox.launcher"}


def _modules(package: ModuleType) -> list[ModuleType]:
    names = [package.__name__] + [
        info.name
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
        if info.name not in UNIMPORTABLE
    ]
    out = []
    for name in names:
        try:
            out.append(importlib.import_module(name))
        except ImportError as exc:  # an optional extra not installed here
            if "pacore_graph" in str(exc) or "tools" in str(exc) or "graphs" in str(exc):
                raise
    return out


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (pacore_graph, graphs, tools):
        for module in _modules(package):
            for name, obj in vars(module).items():
                if (
                    inspect.isclass(obj)
                    and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__
                    and not name.startswith("_")
                ):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_public_exception_class_derives_from_pacore_error() -> None:
    classes = _exception_classes()
    # The walk sees the classes it is meant to see (else it would pass vacuously).
    for known in (
        "pacore_graph.settings.per_run.SettingsError",
        "pacore_graph.cli.common.UsageError",
        "pacore_graph.runs.store_guard.StoreError",
        "tools.sandbox.errors.SandboxError",
        "pacore_graph.errors.UpstreamTimeoutError",
    ):
        assert known in classes
    outside = sorted(
        name
        for name, cls in classes.items()
        if not issubclass(cls, PaCoReError) and name not in OUTSIDE_THE_TREE
    )
    assert outside == []
    assert set(classes) >= OUTSIDE_THE_TREE, "an exemption names a class that is gone"


def test_every_error_class_of_errors_py_is_public_at_the_top_level() -> None:
    """What a caller catches is ``pacore_graph.X``: every error ``errors.py`` defines is there.

    The classes are found in the module itself (not in a list kept here), so a
    new error class that ``errors.__all__`` or ``pacore_graph.__all__`` forgets
    fails this test.
    """
    defined = {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
        and not name.startswith("_")
    }
    assert PaCoReError in defined.values() and ModelCallError in defined.values()
    assert set(defined) <= set(errors.__all__)
    for name, cls in defined.items():
        assert name in pacore_graph.__all__ and getattr(pacore_graph, name) is cls, name
        assert issubclass(cls, PaCoReError), name
        if issubclass(cls, ModelCallError):
            assert "kind" in vars(cls) and cls.kind in ERROR_KINDS, f"{name}: a kind of its own"


#: The builtin second bases kept, each because callers catch the class as that builtin:
#: a missing optional dependency is caught as ``ImportError`` (``pacore train``'s and
#: ``pacore model``'s ``except ImportError`` -> exit 2; docs/rl.md says so); LangGraph's
#: API server shows a client the message of a ``ValueError``, not of an ``Exception``
#: (tests/serve/test_langgraph_dev.py: a bad ``context`` is named to the client).
BUILTIN_BASES = {
    "pacore_graph.rl.RLDependencyError": (ImportError,),
    "pacore_graph.settings.per_run.SettingsError": (ValueError,),
    # pydantic turns only a ValueError raised in a validator into a validation error (a
    # Round's bound checked while a request's JSON is parsed: a 400, not a 500).
    "pacore_graph.settings.fields.BoundError": (ValueError,),
}


def test_the_root_is_a_plain_exception_and_builtin_bases_are_the_justified_ones() -> None:
    assert PaCoReError.__bases__ == (Exception,)
    plain = (object, BaseException, Exception)
    found = {
        name: tuple(b for b in cls.__mro__ if b.__module__ == "builtins" and b not in plain)
        for name, cls in _exception_classes().items()
        if issubclass(cls, PaCoReError)
    }
    assert {name: bases for name, bases in found.items() if bases} == BUILTIN_BASES


def _tree(root: type[ModelCallError] = ModelCallError) -> list[type[ModelCallError]]:
    return [root, *(cls for sub in root.__subclasses__() for cls in _tree(sub))]


COMMON = {"attempts", "upstream"}


def examples() -> list[tuple[ModelCallError, set[str]]]:
    """One error of each class of the tree, and the fields it carries."""
    return [
        (ModelCallError("a client's own failure"), COMMON),
        (
            errors.UpstreamStatusError(
                "HTTP 429 from u", status=429, retryable=True, retry_after=2.0, server_wide=True
            ),
            COMMON | {"status", "retry_after", "retryable", "server_wide"},
        ),
        (
            errors.UpstreamTransportError("cut", retryable=True, server_wide=True),
            COMMON | {"retryable", "server_wide"},
        ),
        (
            errors.UpstreamTimeoutError("slow", retryable=True),
            COMMON | {"retryable", "server_wide"},
        ),
        (errors.UpstreamStreamError("engine died", retryable=True), COMMON | {"retryable"}),
        (errors.NoContentError("content: null"), COMMON),
        (errors.MalformedReplyError("not JSON"), COMMON),
        (errors.ResponseTooLargeError("over the cap"), COMMON),
        (errors.InvalidPromptError("lone surrogate"), COMMON),
    ]


def test_every_class_of_the_tree_has_an_example_here() -> None:
    in_errors = {cls for cls in _tree() if cls.__module__ == errors.__name__}
    assert {type(exc) for exc, _ in examples()} == in_errors


def test_the_kind_is_the_classes_and_cannot_be_passed_in() -> None:
    import pacore_graph.llm.client  # noqa: F401  (its private subclass joins the walk)

    classes = _tree()
    assert len(classes) > len(examples())  # the walk saw subclasses outside errors.py too
    for cls in classes:
        assert "kind" not in inspect.signature(cls).parameters, cls
        assert cls.kind in ERROR_KINDS, cls
    # One kind per class of errors.py, and ERROR_KINDS is exactly theirs.
    own = [cls.kind for cls in classes if cls.__module__ == errors.__name__]
    assert sorted(own) == sorted(set(own)) == sorted(ERROR_KINDS)
    for exc, _ in examples():
        assert "kind" not in vars(exc) and exc.kind == type(exc).kind
    with pytest.raises(TypeError):
        errors.UpstreamTimeoutError("slow", kind="status")  # type: ignore[call-arg]


@pytest.mark.parametrize(("exc", "fields"), examples(), ids=lambda v: type(v).__name__)
def test_each_error_carries_only_the_fields_that_apply(
    exc: ModelCallError, fields: set[str]
) -> None:
    assert set(vars(exc)) == fields
    for name in {"status", "retry_after"} - fields:
        assert not hasattr(exc, name)
    for name in {"retryable", "server_wide"} - fields:
        assert getattr(exc, name) is False  # its class's answer, not stored per error
    assert (exc.attempts, exc.upstream) == (1, None)


@pytest.mark.parametrize(
    ("cls", "kind", "branch"),
    [
        (errors.UpstreamStatusError, "status", ModelCallError),
        (errors.UpstreamTransportError, "transport", ModelCallError),
        (errors.UpstreamTimeoutError, "timeout", errors.UpstreamTransportError),
        (errors.UpstreamStreamError, "stream_error", ModelCallError),
        (errors.NoContentError, "no_content", ModelCallError),
        (errors.MalformedReplyError, "malformed", ModelCallError),
        (errors.ResponseTooLargeError, "response_too_large", ModelCallError),
        (errors.InvalidPromptError, "invalid_prompt", ModelCallError),
    ],
)
def test_each_branch_names_its_kind_and_is_caught_by_its_parents(
    cls: type[ModelCallError], kind: str, branch: type[ModelCallError]
) -> None:
    exc = next(e for e, _ in examples() if type(e) is cls)
    assert exc.kind == kind and kind in ERROR_KINDS
    assert isinstance(exc, branch) and isinstance(exc, ModelCallError)
    assert isinstance(exc, PaCoReError)
    with pytest.raises(ModelCallError):
        raise exc


def test_a_timeout_is_a_transport_failure_but_not_a_status() -> None:
    exc = errors.UpstreamTimeoutError("slow")
    assert isinstance(exc, errors.UpstreamTransportError)
    assert not isinstance(exc, errors.UpstreamStatusError)


def test_http_error_is_a_status_error_with_retry_after() -> None:
    exc = http_error("http://127.0.0.1:1/v1/chat/completions", 503, b"busy", "7")
    assert isinstance(exc, errors.UpstreamStatusError)
    assert (exc.status, exc.retry_after, exc.retryable, exc.server_wide) == (503, 7.0, True, True)
    assert not http_error("http://x", 400, b"", None).retryable


def test_a_mid_stream_error_with_a_code_is_a_status_error() -> None:
    exc = stream_error({"error": {"message": "overloaded", "code": 503}})
    assert isinstance(exc, errors.UpstreamStatusError) and exc.status == 503 and exc.retryable
    plain = stream_error({"error": {"message": "engine died"}})
    assert (
        type(plain) is errors.UpstreamStreamError
        and plain.kind == "stream_error"
        and plain.retryable
    )


@pytest.mark.parametrize(("exc", "fields"), examples(), ids=lambda v: type(v).__name__)
def test_errors_are_immutable(exc: ModelCallError, fields: set[str]) -> None:
    before = (str(exc), dict(vars(exc)))
    for name in [*fields, "kind", "retryable", "server_wide", "args", "message", "__dict__"]:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(exc, name, 1)
    for name in fields:
        with pytest.raises(AttributeError, match="immutable"):
            delattr(exc, name)
    assert (str(exc), dict(vars(exc))) == before
    # What Python itself sets still works: a cause, a note, a traceback.
    exc.__cause__ = ValueError("why")
    exc.add_note("a note")
    with pytest.raises(type(exc)) as raised:
        raise exc
    assert raised.value.__traceback__ is not None and raised.value.__notes__ == ["a note"]


def test_copies_change_the_copy_only_and_keep_the_branch() -> None:
    exc = errors.UpstreamStatusError("HTTP 503 from http://10.0.0.1/v1", status=503, retryable=True)
    exc.__cause__ = OSError("reset")
    named = exc.replace(upstream=2).with_attempts(3, gave_up="gave up after 3 attempts")
    assert type(named) is errors.UpstreamStatusError and named.__cause__ is exc.__cause__
    assert (named.upstream, named.attempts, named.status, named.retryable) == (2, 3, 503, True)
    assert str(named).endswith("(gave up after 3 attempts)")
    assert (exc.upstream, exc.attempts, str(exc)) == (None, 1, "HTTP 503 from http://10.0.0.1/v1")
    # A wrapper's fuller count replaces the inner one instead of doubling it.
    fuller = named.with_attempts(3, gave_up="gave up after 3 attempts over 2 replicas")
    assert str(fuller).count("gave up") == 1 and str(fuller).endswith("over 2 replicas)")
    assert str(exc.replace(message="other text")) == "other text"


def test_a_copy_cannot_add_a_field_its_class_does_not_carry() -> None:
    no_content = errors.NoContentError("content: null")
    for change in ({"status": 500}, {"retryable": True}, {"kind": "status"}, {"_x": 1}):
        with pytest.raises(TypeError, match="has no field"):
            no_content.replace(**change)
    with pytest.raises(TypeError, match="retry_after"):
        errors.UpstreamTransportError("cut").replace(retry_after=1.0)


def test_a_deadline_makes_a_final_copy_and_leaves_the_original() -> None:
    exc = errors.UpstreamTransportError("cut", retryable=True, server_wide=True)
    final = CallDeadline(at=0.0, seconds=5).expire(exc)
    assert isinstance(final, errors.UpstreamTransportError)
    assert not final.retryable and not final.server_wide
    assert "call deadline of 5s reached" in str(final)
    assert exc.retryable and exc.server_wide and "deadline" not in str(exc)
    assert isinstance(CallDeadline(at=0.0, seconds=5).expire(), errors.UpstreamTimeoutError)
    # A class that is never retryable has nothing to turn off: only the note.
    empty = CallDeadline(at=0.0, seconds=5).expire(errors.NoContentError("content: null"))
    assert type(empty) is errors.NoContentError and "deadline" in str(empty) and not empty.retryable


#: Errors whose constructor takes more than a message, built by hand for the pickle test.
BY_HAND: dict[str, Any] = {
    "pacore_graph.errors.RoundFailedError": lambda: errors.RoundFailedError(
        "round 1 failed", round_index=1, errors=["HTTP 500 from u"]
    ),
    "pacore_graph.errors.UpstreamStatusError": lambda: examples()[1][0],
    "pacore_graph.serve.errors.APIError": lambda: _serve("errors").APIError(
        429, "busy", param="model", code="rate_limited", headers={"Retry-After": "2"}
    ),
    "pacore_graph.serve.passthrough.PassthroughFailed": lambda: _serve(
        "passthrough"
    ).PassthroughFailed(1, errors.UpstreamTimeoutError),
    "pacore_graph.settings.request_limits.RequestLimitError": lambda: importlib.import_module(
        "pacore_graph.settings.request_limits"
    ).RequestLimitError("rounds", "17 rounds asked; at most 16"),
    "pacore_graph.settings.fields.BoundError": lambda: importlib.import_module(
        "pacore_graph.settings.fields"
    ).BoundError("max_tokens", "max_tokens: must be >= 1"),
}


def _serve(module: str) -> Any:
    return pytest.importorskip(f"pacore_graph.serve.{module}")


def _one_of_each() -> list[PaCoReError]:
    out: list[PaCoReError] = []
    for name, cls in sorted(_exception_classes().items()):
        if issubclass(cls, PaCoReError):
            out.append(BY_HAND[name]() if name in BY_HAND else cls("boom"))
    return out


def _same(a: BaseException, b: BaseException) -> bool:
    return type(a) is type(b) and a.args == b.args and vars(a) == vars(b)


def test_every_error_pickles_and_copies_with_its_attributes() -> None:
    every = _one_of_each() + [exc for exc, _ in examples()]
    assert len(every) > 30  # the walk found the package's errors
    for exc in every:
        for clone in (pickle.loads(pickle.dumps(exc)), copy.copy(exc), copy.deepcopy(exc)):
            assert _same(clone, exc), exc
    shared = examples()[1][0].replace(upstream=3)
    clone = pickle.loads(pickle.dumps(shared))
    assert (clone.upstream, clone.status, clone.retry_after) == (3, 429, 2.0)
    with pytest.raises(AttributeError, match="immutable"):
        clone.upstream = 0  # type: ignore[misc]


def _fail_in_child(which: int) -> Any:
    """Runs in a worker process: raises one example, returns another (both pickled back)."""
    if which == 0:
        raise examples()[1][0].replace(upstream=1).with_attempts(2)
    return errors.RoundFailedError("round 0 failed", round_index=0, errors=["HTTP 500"])


def test_errors_cross_a_process_boundary() -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        raised = pool.submit(_fail_in_child, 0).exception()
        returned = pool.submit(_fail_in_child, 1).result()
    assert isinstance(raised, errors.UpstreamStatusError)
    assert (raised.status, raised.upstream, raised.attempts) == (429, 1, 2)
    assert isinstance(returned, errors.RoundFailedError) and returned.errors == ["HTTP 500"]
    assert returned.round_index == 0


def test_errors_survive_rays_serializer() -> None:
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    for exc in _one_of_each() + [exc for exc, _ in examples()]:
        assert _same(cloudpickle.loads(cloudpickle.dumps(exc)), exc), exc


def test_public_message_has_no_url_or_body() -> None:
    exc = http_error("http://secret-host:8000/v1/chat/completions", 500, b"stack trace", None)
    text = exc.replace(upstream=1).public_message()
    assert text == "upstream 1 answered HTTP 500"
    assert "secret-host" not in text and "stack" not in text
    timeout = errors.UpstreamTimeoutError("timed out after 3s waiting for http://secret-host/v1")
    assert timeout.public_message() == "the upstream call failed: timed out"
    for exc, _ in examples()[2:]:
        assert exc.public_message() == f"the upstream call failed: {ERROR_KINDS[exc.kind]}"
