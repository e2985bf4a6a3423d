"""The error tree: one root, branches a caller can catch, errors that cannot be patched.

Why these tests: ``errors.py`` promises that errors live "in one place"; the
walk below holds every public exception class of the package (and of
``graphs/`` and ``tools/``) to deriving from :class:`PaCoReError`, so
``except PaCoReError`` keeps meaning "anything pacore-graph raised on purpose".
"""

from __future__ import annotations

import copy
import importlib
import inspect
import pickle
import pkgutil
from types import ModuleType

import pytest

import graphs
import pacore_graph
import tools
from pacore_graph.errors import (
    ERROR_KINDS,
    MalformedReplyError,
    ModelCallError,
    NoContentError,
    PaCoReError,
    ResponseTooLargeError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    UpstreamTransportError,
)
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


def test_classes_caught_as_builtins_keep_that_base() -> None:
    from pacore_graph.otel.exporters import TracingConfigError
    from pacore_graph.rl import RLDependencyError
    from pacore_graph.settings.per_run import SettingsError
    from pacore_graph.settings.request_limits import RequestLimitError

    for cls in (SettingsError, RequestLimitError, TracingConfigError):
        assert issubclass(cls, PaCoReError) and issubclass(cls, ValueError)
    assert issubclass(RLDependencyError, ImportError)


@pytest.mark.parametrize(
    ("cls", "kind", "branch"),
    [
        (UpstreamStatusError, "status", ModelCallError),
        (UpstreamTransportError, "transport", ModelCallError),
        (UpstreamTimeoutError, "timeout", UpstreamTransportError),
        (NoContentError, "no_content", ModelCallError),
        (MalformedReplyError, "malformed", ModelCallError),
        (ResponseTooLargeError, "response_too_large", ModelCallError),
    ],
)
def test_each_branch_names_its_kind_and_is_caught_by_its_parents(
    cls: type[ModelCallError], kind: str, branch: type[ModelCallError]
) -> None:
    exc = cls("boom")
    assert exc.kind == kind and kind in ERROR_KINDS
    assert isinstance(exc, branch) and isinstance(exc, ModelCallError)
    assert isinstance(exc, PaCoReError)
    with pytest.raises(ModelCallError):
        raise exc


def test_a_timeout_is_a_transport_failure_but_not_a_status() -> None:
    exc = UpstreamTimeoutError("slow")
    assert isinstance(exc, UpstreamTransportError)
    assert not isinstance(exc, UpstreamStatusError)


def test_http_error_is_a_status_error_with_retry_after() -> None:
    exc = http_error("http://127.0.0.1:1/v1/chat/completions", 503, b"busy", "7")
    assert isinstance(exc, UpstreamStatusError)
    assert (exc.status, exc.retry_after, exc.retryable, exc.server_wide) == (503, 7.0, True, True)
    assert not http_error("http://x", 400, b"", None).retryable


def test_a_mid_stream_error_with_a_code_is_a_status_error() -> None:
    exc = stream_error({"error": {"message": "overloaded", "code": 503}})
    assert isinstance(exc, UpstreamStatusError) and exc.status == 503 and exc.retryable
    plain = stream_error({"error": {"message": "engine died"}})
    assert not isinstance(plain, UpstreamStatusError) and plain.kind == "other"


@pytest.mark.parametrize(
    "field", ["status", "retryable", "attempts", "retry_after", "server_wide", "kind", "upstream"]
)
def test_errors_are_immutable(field: str) -> None:
    exc = UpstreamStatusError("HTTP 503", status=503, retryable=True)
    with pytest.raises(AttributeError, match="immutable"):
        setattr(exc, field, 1)
    with pytest.raises(AttributeError, match="immutable"):
        exc.args = ("patched",)
    assert exc.status == 503 and str(exc) == "HTTP 503"


def test_copies_change_the_copy_only_and_keep_the_branch() -> None:
    exc = UpstreamStatusError("HTTP 503 from http://10.0.0.1/v1", status=503, retryable=True)
    named = exc.with_upstream(2).with_attempts(3, gave_up="gave up after 3 attempts")
    assert type(named) is UpstreamStatusError
    assert (named.upstream, named.attempts, named.status) == (2, 3, 503)
    assert str(named).endswith("(gave up after 3 attempts)")
    assert (exc.upstream, exc.attempts, str(exc)) == (None, 1, "HTTP 503 from http://10.0.0.1/v1")
    # A wrapper's fuller count replaces the inner one instead of doubling it.
    fuller = named.with_attempts(3, gave_up="gave up after 3 attempts over 2 replicas")
    assert str(fuller).count("gave up") == 1 and str(fuller).endswith("over 2 replicas)")


def test_a_deadline_makes_a_final_copy_and_leaves_the_original() -> None:
    exc = UpstreamTransportError("cut", retryable=True, server_wide=True)
    final = CallDeadline(at=0.0, seconds=5).expire(exc)
    assert isinstance(final, UpstreamTransportError)
    assert not final.retryable and not final.server_wide
    assert "call deadline of 5s reached" in str(final)
    assert exc.retryable and exc.server_wide and "deadline" not in str(exc)
    assert isinstance(CallDeadline(at=0.0, seconds=5).expire(), UpstreamTimeoutError)


def test_errors_survive_pickle_and_copy() -> None:
    exc = UpstreamStatusError("HTTP 429", status=429, retryable=True, retry_after=2.0)
    for clone in (pickle.loads(pickle.dumps(exc)), copy.copy(exc), copy.deepcopy(exc)):
        assert type(clone) is UpstreamStatusError
        assert (clone.status, clone.retry_after, str(clone)) == (429, 2.0, "HTTP 429")


def test_public_message_has_no_url_or_body() -> None:
    exc = http_error("http://secret-host:8000/v1/chat/completions", 500, b"stack trace", None)
    text = exc.with_upstream(1).public_message()
    assert text == "upstream 1 answered HTTP 500"
    assert "secret-host" not in text and "stack" not in text
    timeout = UpstreamTimeoutError("timed out after 3s waiting for http://secret-host/v1")
    assert timeout.public_message() == "the upstream call failed: timed out"
