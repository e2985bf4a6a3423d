"""serve/settings: ``ServeSettings`` refuses a bad server set-up at once, with a one-line reason.

Each bad value names the flag that gave it; an upstream's credentials are
refused without being echoed. What the server then does with good settings is
tested over HTTP in test_serve_app.py, test_guard.py and test_queue.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from pacore_graph.serve.settings import ServeSettings
from pacore_graph.settings.config import SamplingParams
from pacore_graph.settings.request_limits import RequestLimits

UP = "http://127.0.0.1:9/v1"


def settings(**kw: Any) -> ServeSettings:
    return ServeSettings(**{"upstreams": (UP,), "model": "m", **kw})


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"upstreams": ()}, "at least one --upstream"),
        ({"upstreams": (UP, UP)}, "given twice"),
        ({"upstreams": ("ftp://h/v1",)}, "must be an http(s) URL"),
        ({"upstreams": ("http:///v1",)}, "must be an http(s) URL"),
        ({"upstreams": ("http://h:99999/v1",)}, "#0 is not a valid URL"),
        ({"model": ""}, "--model must name"),
        ({"max_concurrency": 0}, "--max-concurrency must be >= 1"),
        ({"max_queue": -1}, "--max-queue must be in"),
        ({"queue_timeout_s": 0.0}, "--queue-timeout must be > 0"),
        ({"max_samples_in_flight": 0}, "--max-samples-in-flight"),
        ({"max_body_bytes": 10}, "--max-body-bytes must be in"),
        ({"max_json_depth": 2}, "max_json_depth must be in"),
        ({"max_connections": 0}, "--max-connections must be >= 1"),
        ({"header_timeout_s": 0.0}, "header_timeout_s must be > 0"),
        ({"retry_after_s": -1}, "retry_after_s must be >= 0"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_flag(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        settings(**kw)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_upstream_credentials_are_refused_without_being_quoted() -> None:
    with pytest.raises(ValueError, match="must not carry credentials") as caught:
        settings(upstreams=(UP, "http://user:s3cret@127.0.0.1:8/v1"))
    assert "#1" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_max_tokens_over_the_request_cap_is_refused_as_the_settings_model_refuses_it() -> None:
    """Built in Python or by ``pacore serve``, the one check of max_tokens against its cap
    (:meth:`RequestLimits.check_settings`) says what the flags' and variables' model says."""
    from pydantic import ValidationError

    from pacore_graph.settings.env_settings import load_settings

    limits = RequestLimits(max_tokens_cap=100)
    with pytest.raises(ValueError) as caught:
        settings(sampling=SamplingParams(max_tokens=101), limits=limits)
    with pytest.raises(ValidationError) as model:
        load_settings({"max_tokens": 101, "max_tokens_cap": 100}, env={})
    text = str(caught.value)
    assert text == (
        "--max-tokens (PACORE_MAX_TOKENS): max_tokens 101 is over the cap of 100 per call "
        "(max_tokens_cap)"
    )
    assert [e["ctx"]["error"].args[0] for e in model.value.errors()] == [text]
    assert settings(sampling=SamplingParams(max_tokens=100), limits=limits).limits is limits


def test_no_queue_timeout_is_allowed_and_the_config_takes_sampling_and_capacity() -> None:
    sampling = SamplingParams(temperature=0.3)
    good = settings(queue_timeout_s=None, max_samples_in_flight=7, sampling=sampling)
    config = good.config()
    assert config.sampling == sampling
    assert config.max_concurrency == 7
    assert config.retry == good.retry
