"""A job that sets idle_session_timeout at session level, in a claim with
other tenants' jobs: the settings are undone before its transaction returns, so the worker's backend is
not terminated while it waits, the runner keeps its session and instance, and every batch-mate runs."""
from __future__ import annotations

import time

import pytest

from conftest import connect
from tenant_logins import enqueue_as, tenant_logins

SETTINGS_JOB = "SELECT set_config('idle_session_timeout', '1', false)"


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"mallory": "evil", "victim": "good"}) as names:
        yield names


def statuses(db: str, jobs: list[int]) -> list[int]:
    with connect(db) as owner:
        return [r[0] for r in owner.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                            "ORDER BY job_id", (jobs,))]


def test_session_settings_of_a_job_do_not_end_the_runner_session(db, logins, start):
    # the settings job first, then many of mallory's own in its batch: the runner takes a moment to record
    # their outcomes before it sends its next message, and the session is idle meanwhile
    jobs = [enqueue_as(db, logins["mallory"], "evil", "settings", SETTINGS_JOB, priority=10)]
    jobs += [enqueue_as(db, logins["mallory"], "evil", f"own {i}", "SELECT 1", priority=5) for i in range(40)]
    jobs += [enqueue_as(db, logins["victim"], "good", f"mate {i}", "SELECT pg_sleep(0.05)") for i in range(4)]
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1"))
    runner.wait_for(lambda r: all(s >= 2 for s in statuses(db, jobs)), what="the first claim finished")
    with connect(db) as owner:
        first = owner.execute("SELECT instance_id FROM broker.broker_queueinstance WHERE status = 'active'").fetchone()
    time.sleep(1.0)  # the worker waits idle far longer than the job's idle_session_timeout
    later = [enqueue_as(db, logins["victim"], "good", f"later {i}", "SELECT 1") for i in range(3)]
    runner.wait_for(lambda r: all(s >= 2 for s in statuses(db, later)), what="the later jobs finished")
    assert statuses(db, jobs + later) == [2] * len(jobs + later)
    with connect(db) as owner:
        assert owner.execute("SELECT instance_id FROM broker.broker_queueinstance WHERE status = 'active'").fetchone() \
            == first, "the runner kept its instance (no session restart)"
        assert owner.execute("SELECT count(*) FROM broker.broker_queueinstance").fetchone() == (1,)
    log = runner.log()
    assert "database unavailable" not in log and "worker connection lost" not in log


def test_a_run_keeps_a_tenant_of_the_callers_transaction_in_that_transaction(db, logins):
    """Putting a job's session settings back does not turn the caller's transaction-local tenant into the
    session's: after COMMIT the caller is back in the default tenant, and the job's own session-level
    settings are gone."""
    job = enqueue_as(db, logins["mallory"], "evil", "tenant", "SELECT set_config('broker.tenant_id', 'good', false), "
                  "set_config('idle_session_timeout', '100', false)")
    with connect(db, user=logins["runner"], autocommit=False) as runner:
        runner.execute("SELECT broker.broker_set_tenant('evil')")
        instance = runner.execute("SELECT broker.broker_register_instance('caller')").fetchone()[0]
        ran = runner.execute("SELECT r.complete_status FROM broker.broker_get(1, %s, 60, 10) g, "
                             "LATERAL broker.broker_run(g.job_id, g.lease_token) r", (instance,)).fetchall()
        runner.commit()
        assert ran == [(2,)] and statuses(db, [job]) == [2]
        assert runner.execute("SELECT broker.broker_current_tenant(), current_setting('idle_session_timeout')"
                              ).fetchone() == ("default", "0")
        runner.rollback()
