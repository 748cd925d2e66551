"""Operating jobs with a real runner (issue 22): cancelling a running job stops its statement and ends it cancelled
with its dependents; a retried job resumes its DAG to completion; a paused queue runs nothing until resumed while
the other queues run. Every wait is on the database's state (generous timeouts), never on elapsed time."""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from conftest import add_job, connect, job_status
from job_checks import COUNTER_DRIFT, wait_until
from pgsql_broker.states import JobState
from runner_process import db_dsn
from tenant_logins import enqueue_as, tenant_logins

P, R, C, F, X = JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED


@pytest.fixture
def runtime_login(db):
    """The runner logs in as a plain broker_runtime member: its cancel (pg_cancel_backend of its own worker
    sessions) needs no superuser."""
    name = f"runner_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE broker_runtime')
    yield name
    with connect(db) as owner:
        owner.execute(f'DROP OWNED BY "{name}"')
    with connect("postgres") as admin:
        admin.execute(f'DROP ROLE "{name}"')


def statuses(db: str, *job_ids: int) -> list[int]:
    with connect(db) as conn:
        return [job_status(conn, j) for j in job_ids]


def test_cancelling_a_running_job_stops_it_and_cancels_its_dependents(db, start, runtime_login):
    with connect(db) as conn:
        long = add_job(conn, "sixty seconds", "SELECT pg_sleep(60)", job_group="long", max_attempts=3)
        after = add_job(conn, "after it", "SELECT 1", depends_on_groups=["long"])
        later = add_job(conn, "after that", "SELECT 1", depends_on_groups=["after it"])
    runner = start(db, user=runtime_login)
    with connect(db) as conn:
        wait_until(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%%broker_run_batch%%' "
                                        "AND state = 'active' AND datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0] == 1,
                   60, "the job to be executing")
        assert conn.execute("SELECT broker.broker_cancel_job(%s, 'operator: wrong input')", (long,)).fetchone()[0] == 1
        wait_until(lambda: job_status(conn, long) == X, 60, "the running job to end cancelled")
        assert conn.execute("SELECT cancel_reason, attempts FROM broker.broker_jobs WHERE job_id = %s",
                            (long,)).fetchone() == ("operator: wrong input", 1)
        assert statuses(db, after, later) == [X, X]
        assert conn.execute("SELECT outcome, error_sqlstate FROM broker.broker_job_attempts WHERE job_id = %s",
                            (long,)).fetchall() == [("cancelled", "57014")]
        # the runner goes on: the next job of that queue runs
        quick = add_job(conn, "next", "SELECT 1")
        wait_until(lambda: job_status(conn, quick) == C, 60, "the next job to complete")
    assert "cancelling a running job" in runner.log()
    status, body = runner.get("/metrics")
    assert status == 200 and 'broker_job_cancel_signals_total{database=' in body.decode()


def test_a_forged_cancel_notify_stops_nothing(db, start, runtime_login):
    """Any login may NOTIFY: without a cancel request the runner leaves the job alone."""
    with connect(db) as conn:
        conn.execute("CREATE TABLE gate ()")
        job = add_job(conn, "gated", "BEGIN FOR i IN 1..600 LOOP EXIT WHEN EXISTS (SELECT FROM public.gate); "
                                     "PERFORM pg_sleep(0.1); END LOOP; END", job_language="plpgsql")
        conn.execute("GRANT SELECT ON gate TO PUBLIC")
    runner = start(db, user=runtime_login)
    with connect(db) as conn:
        wait_until(lambda: job_status(conn, job) == R, 60, "the job to run")
        for _ in range(3):
            conn.execute("SELECT pg_notify('pgsql_broker', current_database() || '/cancel/' || %s)", (str(job),))
        conn.execute("SELECT pg_sleep(1.5)")  # longer than the runner's poll of cancel requests (POLL_SEC)
        assert job_status(conn, job) == R, runner.log()[-2000:]
        conn.execute("INSERT INTO gate DEFAULT VALUES")
        wait_until(lambda: job_status(conn, job) == C, 120, "the job to complete")
    assert "cancelling a running job" not in runner.log()


def test_cancelling_a_job_that_waits_in_a_transaction_of_jobs_fails_none_of_the_others(db, start, runtime_login):
    """A job claimed with others waits in their transaction while one of them executes: a signal to that backend
    would cancel the job executing, not the one asked for. The runner leaves such a transaction alone (its batch
    budget bounds it): the job executing completes, and the one asked for keeps its result if it completes
    before the cancel lands (it does here: the budget is long)."""
    with connect(db) as conn:
        conn.execute("CREATE TABLE gate ()")
        conn.execute("GRANT SELECT ON gate TO PUBLIC")
        with conn.transaction():  # claimed together: one tenant, one run_as role, no timeout
            first = add_job(conn, "executing", "BEGIN FOR i IN 1..600 LOOP EXIT WHEN EXISTS (SELECT FROM public.gate); "
                                               "PERFORM pg_sleep(0.05); END LOOP; END", job_language="plpgsql")
            waiting = add_job(conn, "waiting behind it", "SELECT 1")
            after = add_job(conn, "after the first", "SELECT 1", depends_on_job_ids=[first])
    runner = start(db, user=runtime_login, extra=("--batch-budget-ms", "60000", "--lease-seconds", "300"))
    with connect(db) as conn:
        wait_until(lambda: statuses(db, first, waiting) == [R, R], 60, "both to be claimed")
        assert conn.execute("SELECT broker.broker_cancel_job(%s, 'not this one')", (waiting,)).fetchone()[0] == 1
        conn.execute("SELECT pg_sleep(1.5)")  # longer than the runner's poll of cancel requests (POLL_SEC)
        conn.execute("INSERT INTO gate DEFAULT VALUES")
        wait_until(lambda: min(statuses(db, first, waiting, after)) >= C, 120, "every job to finish")
        assert statuses(db, first, waiting, after) == [C, C, C]
        assert conn.execute("SELECT outcome FROM broker.broker_job_attempts WHERE job_id = %s", (first,)).fetchall() == [
            ("completed",)]
    assert "cancelling a running job" not in runner.log()


def test_a_retried_job_resumes_its_dag_to_completion(db, start, runtime_login):
    with connect(db) as conn:
        conn.execute("CREATE TABLE ready (ok boolean NOT NULL)")
        conn.execute("INSERT INTO ready VALUES (false)")
        conn.execute("GRANT SELECT ON ready TO PUBLIC")
        extract = add_job(conn, "extract", "SELECT 1 / (CASE WHEN ok THEN 1 ELSE 0 END) FROM ready", job_group="extract")
        transform = add_job(conn, "transform", "SELECT 1", job_group="transform", depends_on_groups=["extract"])
        load = add_job(conn, "load", "SELECT 1", depends_on_groups=["transform"])
    start(db, user=runtime_login)
    wait_until(lambda: statuses(db, extract, transform, load) == [F, X, X], 60, "the DAG to break")
    with connect(db) as conn:
        conn.execute("UPDATE ready SET ok = true")
        assert conn.execute("SELECT broker.broker_retry_job(%s)", (extract,)).fetchone()[0] == 3
    wait_until(lambda: statuses(db, extract, transform, load) == [C, C, C], 60, "the DAG to complete")
    with connect(db) as conn:
        assert conn.execute(COUNTER_DRIFT).fetchall() == []
        assert conn.execute("SELECT outcome FROM broker.broker_job_attempts WHERE job_id = %s ORDER BY attempt_id",
                            (extract,)).fetchall() == [("failed",), ("completed",)]


def test_a_paused_queue_runs_nothing_until_resumed(db, start, runtime_login):
    with connect(db) as conn:
        assert conn.execute("SELECT broker.broker_pause_queue(1)").fetchone()[0] is True
        paused = add_job(conn, "paused", "SELECT 1", job_queue=1)
        other = add_job(conn, "other queue", "SELECT 1", job_queue=2)
    runner = start(db, user=runtime_login, extra=("--queue-depth-poll-sec", "0.2"))
    wait_until(lambda: statuses(db, other) == [C], 60, "the other queue's job to run")
    runner.wait_for(lambda r: 'broker_queue_paused{database="' + db + '",queue="1",tenant="default"} 1.0'
                    in r.get("/metrics")[1].decode(), 60, "the paused gauge")
    runner.wait_for(lambda r: "jobs wait in a paused queue" in r.log(), 60, "the paused queue's warning")
    with connect(db) as conn:
        # the worker of queue 1 has claimed (nothing) since: queue 2's job ran after the pause, and the
        # runner's metrics show the pause, so both workers are up; queue 1's job is untouched
        assert conn.execute("SELECT complete_status, attempts FROM broker.broker_jobs WHERE job_id = %s",
                            (paused,)).fetchone() == (P, 0)
        assert conn.execute("SELECT broker.broker_pause_queue(1, false)").fetchone()[0] is True
    wait_until(lambda: statuses(db, paused) == [C], 60, "the resumed queue's job to run")
    assert runner.log().count("jobs wait in a paused queue") == 1  # said once, not at every poll


def test_status_marks_a_paused_queue_for_the_runtime_and_for_the_tenants_own_login(db):
    """Nothing waits unseen: `pgsql-broker status` says a queue is paused to whoever sees its jobs, an enqueue
    login (its own tenants' counts) as well as a runtime login (every tenant's)."""
    with tenant_logins(db, {"alice": "acme"}) as names:
        enqueue_as(db, names["alice"], "acme", "waits", "SELECT 1")  # queue 1
        with connect(db, user=names["alice"], autocommit=False) as conn:
            conn.execute("SELECT broker.broker_set_tenant('acme')")
            assert conn.execute("SELECT broker.broker_pause_queue(1)").fetchone()[0] is True
            conn.commit()
        for login in (names["alice"], names["runner"]):
            out = subprocess.run([sys.executable, "-m", "pgsql_broker", "status", "--dsn", db_dsn(db, login)],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            rows = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
            assert [(r[0], r[1], r[2], r[-1]) for r in rows] == [("1", "acme", "1", "paused")], (login, out.stdout)
