"""OpenTelemetry traces (the optional extra `otel`): one span per attempt of a SQL job (the runner) or a task
(the task worker), the child of the trace context its enqueuer stored with it (broker_jobs.traceparent, from
the enqueuer's setting broker.traceparent), linked to the span of the job's previous attempt when this process
ran it; exported over OTLP/HTTP when configured. The runner and the task worker both use this module.

Without the extra nothing here imports OpenTelemetry: `installed()` only looks for the packages, and
`current_traceparent()` returns None. Span names and attributes follow OpenTelemetry's messaging conventions
(a `process` span of kind CONSUMER, the child of the producer's context).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from importlib.util import find_spec
from typing import Any

from .. import __version__

EXTRA = "pip install 'pgsql-broker[otel]'"
SYSTEM = "pgsql_broker"
# the enqueuer's trace context for the jobs its transaction makes (broker_jobs.traceparent's default reads it)
SET_TRACEPARENT = "SELECT pg_catalog.set_config('broker.traceparent', %(traceparent)s, true)"
# span contexts of this process's last attempts, by (database, job id): what a retry links to (bounded: a job
# retried after this many other attempts, or by another process, goes without the link)
REMEMBERED_ATTEMPTS = 10_000


def _found(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # (a parent package missing)
        return False


def installed() -> bool:
    """The SDK and the OTLP/HTTP exporter are installed (the extra `otel`); nothing is imported."""
    return _found("opentelemetry.sdk") and _found("opentelemetry.exporter.otlp.proto.http")


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, when the OpenTelemetry API is installed and a span is current."""
    if not _found("opentelemetry.trace"):
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def otlp_provider(service_name: str, endpoint: str = ""):
    """A TracerProvider exporting in batches over OTLP/HTTP: to `endpoint` (the OTLP base URL, /v1/traces
    added), else where OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT say (the exporter's
    own defaults, http://localhost:4318)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces") if endpoint else OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class AttemptTracer:
    """Spans of attempts, made with `provider` (an SDK TracerProvider, or the API's global one)."""

    def __init__(self, provider: Any, owned: bool = False):
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        self._trace = trace
        self._provider, self._owned = provider, owned
        self._tracer = provider.get_tracer("pgsql_broker", __version__)
        self._propagator = TraceContextTextMapPropagator()
        self._previous: OrderedDict[tuple[str, int], Any] = OrderedDict()

    def start(self, *, database: str, job_id: int, job_name: str, tenant: str, destination: str, attempt: int,
              traceparent: str | None, task: bool = False, start_ns: int | None = None):
        """The span of one attempt, started (now, or at start_ns): the child of the enqueuer's context (a root
        span without one), linked to the previous attempt's span when this process made it."""
        from opentelemetry.context import Context
        from opentelemetry.trace import Link, SpanKind
        parent = self._propagator.extract({"traceparent": traceparent}) if traceparent else Context()
        links = []
        previous = self._previous.get((database, job_id)) if attempt > 1 else None
        if previous is not None:
            links.append(Link(previous, {"pgsql_broker.link": "previous_attempt"}))
        attributes = {"messaging.system": SYSTEM, "messaging.operation.type": "process",
                      "messaging.operation.name": "process", "messaging.destination.name": destination,
                      "messaging.message.id": str(job_id), "db.namespace": database,
                      "pgsql_broker.job.id": job_id, "pgsql_broker.job.name": job_name,
                      "pgsql_broker.tenant": tenant, "pgsql_broker.attempt": attempt}
        if task:
            attributes["pgsql_broker.task"] = job_name
        else:
            attributes["pgsql_broker.queue"] = int(destination)
        return self._tracer.start_span(f"process {destination}", context=parent, kind=SpanKind.CONSUMER,
                                       attributes=attributes, links=links,
                                       start_time=start_ns if start_ns is not None else time.time_ns())

    def end(self, span: Any, *, database: str, job_id: int, outcome: str, sqlstate: str | None = None,
            rows: int | None = None, error: str | None = None) -> None:
        """End an attempt's span with its outcome (completed, retrying, failed, cancelled, ...), SQLSTATE and
        rows; remember its context for the job's next attempt."""
        from opentelemetry.trace import Status, StatusCode
        span.set_attribute("pgsql_broker.outcome", outcome)
        if sqlstate:
            span.set_attribute("pgsql_broker.sqlstate", sqlstate)
            span.set_attribute("error.type", sqlstate)
        if rows is not None:
            span.set_attribute("pgsql_broker.rows", rows)
        if outcome in ("failed", "retrying"):
            span.set_status(Status(StatusCode.ERROR, error or sqlstate))
        span.end()
        key = (database, job_id)
        self._previous[key] = span.get_span_context()
        self._previous.move_to_end(key)
        while len(self._previous) > REMEMBERED_ATTEMPTS:
            self._previous.popitem(last=False)

    def use(self, span: Any):
        """A context manager making `span` the current one (a task's handler: its own spans become children)."""
        return self._trace.use_span(span, end_on_exit=False)

    def shutdown(self) -> None:
        """Export what is buffered and stop, for a provider this module made (a caller's is the caller's)."""
        if self._owned:
            self._provider.shutdown()


def from_settings(broker: Any, provider: Any = None) -> AttemptTracer | None:
    """The runner's tracer: with `provider` (library mode, tests), or an OTLP exporter when
    broker.traces_enabled; None otherwise. settings.load has refused traces_enabled without the extra."""
    if provider is not None:
        return AttemptTracer(provider)
    if not broker.traces_enabled:
        return None
    return AttemptTracer(otlp_provider(broker.traces_service_name, broker.traces_endpoint), owned=True)
