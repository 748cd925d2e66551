"""Traces leave a real runner process over OTLP/HTTP (docs/tracing.md): an OTLP/HTTP receiver started by the test
on loopback, found through the standard OTEL_EXPORTER_OTLP_ENDPOINT, gets the span of a job's attempt, in the trace
of the traceparent its enqueuer set. Without the extra, a runner asked for traces stops at start with one line,
and one that is not asked imports nothing of OpenTelemetry."""
from __future__ import annotations

import http.server
import subprocess
import sys
import threading

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                     ExportTraceServiceResponse)

from conftest import connect
from runner_process import db_dsn

TRACE_ID, PARENT_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
# Python that hides OpenTelemetry from what runs after it, as if the extra were not installed
WITHOUT_OTEL = "import sys; sys.modules['opentelemetry'] = None; "


class Receiver(http.server.ThreadingHTTPServer):
    """POST /v1/traces: each ExportTraceServiceRequest's spans, with their resource's attributes."""

    def __init__(self):
        self.spans: list[tuple[dict, object]] = []
        self.arrived = threading.Condition()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        assert self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
        with self.server.arrived:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.server.spans.extend((resource, span) for span in scope_spans.spans)
            self.server.arrived.notify_all()
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _attributes(span) -> dict:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


def test_a_runner_process_exports_a_jobs_attempt_in_its_enqueuers_trace(db, start, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.server_address[1]}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # (the batch processor's pause, in ms: no 5 s wait)
    with connect(db) as conn, conn.transaction():
        conn.execute(f"SET LOCAL broker.traceparent = '00-{TRACE_ID}-{PARENT_ID}-01'")
        job = conn.execute("SELECT job_id FROM broker.broker_add_job('exported', "
                           "'SELECT g FROM generate_series(1, 4) AS g')").fetchone()[0]
    runner = start(db, extra=("--traces-enabled", "--traces-service-name", "billing-broker",
                              "--queue-timer-sec", "0.2"))
    with receiver.arrived:
        assert receiver.arrived.wait_for(lambda: receiver.spans, timeout=30), runner.log()[-3000:]
    resource, span = receiver.spans[0]
    assert resource["service.name"] == "billing-broker"
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID
    assert span.name == "process 1" and span.kind == span.SPAN_KIND_CONSUMER
    attributes = _attributes(span)
    assert attributes["pgsql_broker.job.id"] == job and attributes["pgsql_broker.job.name"] == "exported"
    assert attributes["pgsql_broker.outcome"] == "completed" and attributes["pgsql_broker.rows"] == 4
    assert attributes["pgsql_broker.attempt"] == 1 and attributes["db.namespace"] == db


def test_traces_without_the_extra_stop_the_runner_with_one_line(db):
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTEL + "from pgsql_broker.cli import runner_main; runner_main()",
                           "--dsn", db_dsn(db), "--traces-enabled"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "OpenTelemetry" in line]
    assert lines == ["Error: broker.traces_enabled is true but OpenTelemetry is not installed: "
                     "pip install 'pgsql-broker[otel]'"], done.stderr


def test_without_traces_nothing_imports_opentelemetry():
    code = ("import sys; import pgsql_broker.cli, pgsql_broker.broker, pgsql_broker.tasks; "
            "from pgsql_broker.settings import load; load(env={}, dsns=['dbname=x']); "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
