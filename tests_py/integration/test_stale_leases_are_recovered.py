"""Stale-lease recovery across sessions: a dead worker's job comes back, a running one never does."""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

from pgsql_broker.states import JobState
from conftest import add_job, connect, job_status
from job_checks import wait_until


def lease_expired(conn, job: int) -> bool:
    return conn.execute("SELECT lease_expires_at < clock_timestamp() FROM broker.broker_jobs WHERE job_id = %s",
                        (job,)).fetchone()[0]


def test_expired_lease_of_a_dead_worker_is_recovered(db):
    admin = connect(db)
    job = add_job(admin, "orphan", "SELECT 1", max_attempts=2)
    worker = connect(db)
    # (a lease a slow machine does not outlive between the claim and the first recovery below)
    claimed = worker.execute("SELECT job_id FROM broker.broker_get(1, NULL, 5)").fetchall()
    assert claimed == [(job,)]
    worker.close()  # the worker dies between claim and run

    assert admin.execute("SELECT * FROM broker.broker_recover_stale_jobs()").fetchall() == []  # lease still valid
    wait_until(lambda: lease_expired(admin, job), what="the lease to expire")
    assert admin.execute("SELECT * FROM broker.broker_recover_stale_jobs()").fetchall() == [(job, JobState.PENDING)]
    row = admin.execute("SELECT attempts, lease_token, last_error_message FROM broker.broker_jobs WHERE job_id = %s",
                        (job,)).fetchone()
    assert row[0] == 1 and row[1] is None and row[2].startswith("lease expired")


def test_a_job_still_executing_is_never_recovered(db):
    admin = connect(db)
    admin.execute("CREATE TABLE public.gate ()")
    admin.execute("GRANT SELECT ON public.gate TO PUBLIC")
    # runs until the test opens the gate: it still executes however late the checks below come
    job = add_job(admin, "long", "BEGIN LOOP EXIT WHEN EXISTS (SELECT FROM public.gate); PERFORM pg_sleep(0.05); "
                                 "END LOOP; END", job_language="plpgsql", max_attempts=5)
    worker = connect(db)
    pid = worker.info.backend_pid
    worker.execute("SELECT broker.broker_get(1, NULL, 1)")  # 1-second lease
    outcome = {}

    def run():
        outcome["row"] = worker.execute("SELECT complete_status FROM broker.broker_run(%s)", (job,)).fetchone()

    t = threading.Thread(target=run)
    t.start()
    wait_until(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event = 'PgSleep'",
                                     (pid,)).fetchone()[0] == 1, what="the job to execute")
    wait_until(lambda: lease_expired(admin, job), what="the lease to expire while the job executes")
    assert admin.execute("SELECT * FROM broker.broker_recover_stale_jobs()").fetchall() == []
    other = connect(db)
    assert other.execute("SELECT * FROM broker.broker_get(1)").fetchall() == []
    admin.execute("INSERT INTO public.gate DEFAULT VALUES")
    t.join(30)
    assert outcome["row"] == (JobState.COMPLETED,)
    assert admin.execute("SELECT complete_status, attempts FROM broker.broker_jobs WHERE job_id = %s",
                         (job,)).fetchone() == (JobState.COMPLETED, 1)


def test_a_worker_killed_mid_job_leaves_no_effects_and_the_job_returns(db):
    admin = connect(db)
    admin.execute("CREATE TABLE effects (v int)")
    job = add_job(admin, "killed", "INSERT INTO effects VALUES (1); SELECT pg_sleep(30)", max_attempts=3)
    worker = connect(db)
    pid = worker.info.backend_pid
    worker.execute("SELECT broker.broker_get(1, NULL, 1)")

    def run():
        with pytest.raises(psycopg.OperationalError):
            worker.execute("SELECT broker.broker_run(%s)", (job,))

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    t.join(10)
    time.sleep(1.0)
    assert admin.execute("SELECT * FROM broker.broker_recover_stale_jobs()").fetchall() == [(job, JobState.PENDING)]
    assert admin.execute("SELECT count(*) FROM effects").fetchone() == (0,)
    admin.execute("UPDATE broker.broker_jobs SET run_after = now(), execute_str = 'INSERT INTO effects VALUES (2)' "
                  "WHERE job_id = %s", (job,))
    admin.execute("SELECT broker.broker_run(job_id) FROM broker.broker_get(1)")
    assert job_status(admin, job) == JobState.COMPLETED
    assert admin.execute("SELECT array_agg(v) FROM effects").fetchone() == ([2],)


def test_running_a_job_after_losing_its_lease_is_refused(db):
    admin = connect(db)
    job = add_job(admin, "slowpoke", "SELECT 1", max_attempts=3)
    slow = connect(db)
    token = slow.execute("SELECT lease_token FROM broker.broker_get(1, NULL, 1)").fetchone()[0]
    time.sleep(1.2)
    assert admin.execute("SELECT * FROM broker.broker_recover_stale_jobs()").fetchall() == [(job, JobState.PENDING)]
    admin.execute("UPDATE broker.broker_jobs SET run_after = now() WHERE job_id = %s", (job,))
    fast = connect(db)
    new_token = fast.execute("SELECT lease_token FROM broker.broker_get(1)").fetchone()[0]
    assert new_token != token
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="no longer yours"):
        slow.execute("SELECT broker.broker_run(%s, %s)", (job, token))
    assert fast.execute("SELECT complete_status FROM broker.broker_run(%s, %s)", (job, new_token)).fetchone() == (2,)
