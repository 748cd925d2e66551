"""The runner's trace settings (docs/tracing.md) come from the file, the environment or flags like the others, and a
bad one is a ConfigError naming it; with traces on, the runner makes a tracer exporting over OTLP/HTTP, with them off
none."""
from __future__ import annotations

import pytest

from pgsql_broker.config import ConfigError
from pgsql_broker.observe import tracing
from pgsql_broker.settings import load

DSN = ["dbname=app host=/tmp"]


@pytest.mark.parametrize("env, message", [
    ({"PGBROKER_TRACES_ENDPOINT": "collector:4318"}, "broker.traces_endpoint must be an http:// or https:// URL"),
    ({"PGBROKER_TRACES_SERVICE_NAME": "  "}, "broker.traces_service_name must not be blank"),
    ({"PGBROKER_TRACES_ENABLED": "perhaps"}, "broker.traces_enabled"),
])
def test_a_bad_trace_setting_is_named(env, message):
    with pytest.raises(ConfigError, match=message):
        load(env=env, dsns=DSN)


def test_traces_on_make_an_otlp_tracer_and_off_none():
    settings = load(env={"PGBROKER_TRACES_ENABLED": "true", "PGBROKER_TRACES_ENDPOINT": "http://127.0.0.1:4318/",
                         "PGBROKER_TRACES_SERVICE_NAME": "billing"}, dsns=DSN)
    tracer = tracing.from_settings(settings.broker)
    try:
        assert tracer._provider.resource.attributes["service.name"] == "billing"
        processor = tracer._provider._active_span_processor._span_processors[0]
        assert processor.span_exporter._endpoint == "http://127.0.0.1:4318/v1/traces"
    finally:
        tracer.shutdown()
    assert tracing.from_settings(load(env={}, dsns=DSN).broker) is None
