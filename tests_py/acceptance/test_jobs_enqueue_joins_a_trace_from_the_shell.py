"""pgsql-broker jobs enqueue and enqueue-task pass a trace context (docs/tracing.md): --traceparent, else the
environment's TRACEPARENT, stored with the job; a malformed one is the database's refusal (22023), one line and exit
code 2, and nothing is enqueued."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import connect
from runner_process import db_dsn

GIVEN = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
FROM_ENV = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def cli(db: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TRACEPARENT"} | (env or {})
    return subprocess.run([sys.executable, "-m", "pgsql_broker", "jobs", *args[:1], "--dsn", db_dsn(db), *args[1:]],
                          capture_output=True, text=True, timeout=60, env=environment)


def test_enqueue_and_enqueue_task_store_the_trace_context_they_are_given(db):
    made = [cli(db, "enqueue", "--name", "a", "--traceparent", GIVEN, "SELECT 1", env={"TRACEPARENT": FROM_ENV}),
            cli(db, "enqueue-task", "send_email", "{}", env={"TRACEPARENT": FROM_ENV})]
    assert [m.returncode for m in made] == [0, 0], [m.stderr for m in made]
    with connect(db) as conn:
        stored = conn.execute("SELECT job_name, traceparent FROM broker.broker_jobs ORDER BY job_id").fetchall()
    assert stored == [("a", GIVEN), ("send_email", FROM_ENV)]  # (the option first, then the environment)


def test_a_malformed_trace_context_is_one_line_and_enqueues_nothing(db):
    bad = cli(db, "enqueue", "--name", "a", "SELECT 1", env={"TRACEPARENT": "00-abc-01"})
    assert bad.returncode == 2, (bad.stdout, bad.stderr)
    assert bad.stderr.count("\n") == 1 and "SQLSTATE 22023" in bad.stderr and "broker.traceparent" in bad.stderr
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs").fetchone()[0] == 0
