"""A job that sets idle_session_timeout at session level, in a claim with
other tenants' jobs: the settings are undone before its transaction returns, so the worker's backend is
not terminated while it waits, the runner keeps its session and instance, and every batch-mate runs."""
from __future__ import annotations

import time
import uuid

import pytest

from conftest import connect

SETTINGS_JOB = "SELECT set_config('idle_session_timeout', '1', false)"


@pytest.fixture
def logins(db):
    suffix = uuid.uuid4().hex[:8]
    names = {"mallory": f"mallory_{suffix}", "victim": f"victim_{suffix}", "runner": f"runner_{suffix}"}
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{names["mallory"]}" LOGIN IN ROLE broker_enqueue')
        admin.execute(f'CREATE ROLE "{names["victim"]}" LOGIN IN ROLE broker_enqueue')
        admin.execute(f'CREATE ROLE "{names["runner"]}" LOGIN IN ROLE broker_runtime')
    with connect(db) as owner:
        owner.execute("SELECT broker.broker_set_strict_tenancy(true)")
        owner.execute("INSERT INTO broker.broker_tenant_roles VALUES ('evil', %s), ('good', %s)",
                      (names["mallory"], names["victim"]))
    yield names
    with connect(db) as owner:
        for name in names.values():
            owner.execute(f'DROP OWNED BY "{name}"')
    with connect("postgres") as admin:
        for name in names.values():
            admin.execute(f'DROP ROLE "{name}"')


def enqueue(db: str, user: str, tenant: str, name: str, sql: str, priority: int = 0) -> int:
    with connect(db, user=user, autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant(%s)", (tenant,))
        job = conn.execute("SELECT job_id FROM broker.broker_add_job(%s, %s, p_job_priority => %s, "
                           "p_max_attempts => 1)", (name, sql, priority)).fetchone()[0]
        conn.commit()
        return job


def statuses(db: str, jobs: list[int]) -> list[int]:
    with connect(db) as owner:
        return [r[0] for r in owner.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                            "ORDER BY job_id", (jobs,))]


def test_session_settings_of_a_job_do_not_end_the_runner_session(db, logins, start):
    # the settings job first, then many of mallory's own in its batch: the runner takes a moment to record
    # their outcomes before it sends its next message, and the session is idle meanwhile
    jobs = [enqueue(db, logins["mallory"], "evil", "settings", SETTINGS_JOB, priority=10)]
    jobs += [enqueue(db, logins["mallory"], "evil", f"own {i}", "SELECT 1", priority=5) for i in range(40)]
    jobs += [enqueue(db, logins["victim"], "good", f"mate {i}", "SELECT pg_sleep(0.05)") for i in range(4)]
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1"))
    runner.wait_for(lambda r: all(s >= 2 for s in statuses(db, jobs)), what="the first claim finished")
    with connect(db) as owner:
        first = owner.execute("SELECT instance_id FROM broker.broker_queueinstance WHERE status = 'active'").fetchone()
    time.sleep(1.0)  # the worker waits idle far longer than the job's idle_session_timeout
    later = [enqueue(db, logins["victim"], "good", f"later {i}", "SELECT 1") for i in range(3)]
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
    job = enqueue(db, logins["mallory"], "evil", "tenant", "SELECT set_config('broker.tenant_id', 'good', false), "
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
