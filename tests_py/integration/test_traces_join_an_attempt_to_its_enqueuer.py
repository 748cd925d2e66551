"""Traces (docs/tracing.md): a job enqueued inside a span carries that span's context (broker.traceparent), and
each attempt of it, in the runner (a SQL job) or in the task worker (a task), is a span of the same trace, the
child of the enqueuing span; a retry's span links to the previous attempt's. Spans are caught with the SDK's
in-memory exporter; the runner and the worker run in this process, as libraries."""
from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import connect
from runner_process import db_dsn
from worker_process import worker_login


@pytest.fixture
def traced():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _wait(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _serve_until(server, predicate) -> None:
    """server.run() (a Broker or a task Worker) in a thread of its own until predicate() holds, then stopped."""
    thread = threading.Thread(target=lambda: asyncio.run(server.run()), daemon=True)
    thread.start()
    try:
        _wait(predicate, "two attempt spans")
    finally:
        server.stop()
        thread.join(30)
    assert not thread.is_alive()


def _attempts(exporter, job_id: int) -> list:
    return sorted((s for s in exporter.get_finished_spans() if s.attributes.get("pgsql_broker.job.id") == job_id),
                  key=lambda s: s.attributes["pgsql_broker.attempt"])


def _check_trace(enqueuing, attempts, outcomes: list[str]) -> None:
    """Each attempt: a consumer span of the enqueuer's trace, its child; the second links to the first."""
    assert [s.attributes["pgsql_broker.outcome"] for s in attempts] == outcomes
    assert [s.attributes["pgsql_broker.attempt"] for s in attempts] == [1, 2]
    for span in attempts:
        assert span.kind == SpanKind.CONSUMER
        assert span.context.trace_id == enqueuing.context.trace_id
        assert span.parent.span_id == enqueuing.context.span_id
        assert span.attributes["messaging.system"] == "pgsql_broker"
        assert span.attributes["messaging.operation.type"] == "process"
    assert attempts[0].status.status_code == StatusCode.ERROR
    assert not attempts[0].links
    assert [link.context.span_id for link in attempts[1].links] == [attempts[0].context.span_id]
    assert attempts[1].links[0].attributes["pgsql_broker.link"] == "previous_attempt"


def test_a_sql_jobs_attempts_are_spans_of_the_enqueuers_trace(db, traced):
    from pgsql_broker import Broker, enqueue, load_settings
    provider, exporter = traced
    tracer = provider.get_tracer("test")
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        conn.execute("CREATE SEQUENCE flip")  # the first attempt divides by zero, the second does not
        with tracer.start_as_current_span("enqueue request") as enqueuing:
            job = enqueue(conn, "traced job", "SELECT 1 / (nextval('flip')::int - 1) FROM generate_series(1, 3)",
                          max_attempts=2, job_queue=2)
        stored = conn.execute("SELECT traceparent FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone()[0]
    with connect(db, autocommit=False) as conn, tracer.start_as_current_span("enqueue rolled back"):
        enqueue(conn, "rolled back", "SELECT 1")  # (in the caller's transaction: enqueue() commits nothing itself)
        conn.rollback()
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs").fetchone()[0] == 1
    assert stored == f"00-{enqueuing.context.trace_id:032x}-{enqueuing.context.span_id:016x}-{enqueuing.context.trace_flags:02x}"

    settings = load_settings(env={}, dsns=[db_dsn(db)], flags={"metrics_port": 0, "queue_timer_sec": 0.2,
                                                                "allow_privileged_login": True})
    broker = Broker(settings, tracer_provider=provider)
    _serve_until(broker, lambda: len(_attempts(exporter, job)) == 2)
    attempts = _attempts(exporter, job)
    _check_trace(enqueuing, attempts, ["retrying", "completed"])
    first, second = attempts
    assert first.name == "process 2" and first.attributes["pgsql_broker.queue"] == 2
    assert first.attributes["pgsql_broker.sqlstate"] == "22012"
    assert first.attributes["pgsql_broker.job.name"] == "traced job"
    assert first.attributes["pgsql_broker.tenant"] == "default"
    assert second.attributes["pgsql_broker.rows"] == 3
    assert "pgsql_broker.sqlstate" not in second.attributes


def test_a_tasks_attempts_are_spans_of_the_enqueuers_trace_and_hold_the_handlers_own(db, traced):
    from pgsql_broker.observe import tracing
    from pgsql_broker.tasks import Worker
    provider, exporter = traced
    tracer = provider.get_tracer("test")
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        with tracer.start_as_current_span("enqueue request") as enqueuing, conn.transaction():
            conn.execute(tracing.SET_TRACEPARENT, {"traceparent": tracing.current_traceparent()})
            task_id = conn.execute("SELECT job_id FROM broker.broker_add_task('traced_task', '{\"n\": 1}', "
                                   "p_max_attempts => 2)").fetchone()[0]

    with worker_login(db) as login:
        dsn = f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={login}"
        worker = Worker(dsn, concurrency=2, lease_seconds=5, poll_seconds=0.2, shutdown_seconds=1,
                        tracer_provider=provider)

        @worker.task("traced_task")
        async def handler(args, ctx):
            with tracer.start_as_current_span("handler work"):
                if ctx.attempt == 1:
                    raise RuntimeError("first attempt fails")
            return {"n": args["n"]}

        _serve_until(worker, lambda: len(_attempts(exporter, task_id)) == 2)
    attempts = _attempts(exporter, task_id)
    _check_trace(enqueuing, attempts, ["retrying", "completed"])
    assert attempts[0].name == "process traced_task"
    assert attempts[0].attributes["pgsql_broker.task"] == "traced_task"
    assert "first attempt fails" in attempts[0].status.description
    handler_spans = [s for s in exporter.get_finished_spans() if s.name == "handler work"]
    assert sorted(s.parent.span_id for s in handler_spans) == sorted(s.context.span_id for s in attempts)
