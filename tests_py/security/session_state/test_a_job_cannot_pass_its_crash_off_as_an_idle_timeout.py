"""A job that ends its worker's backend (exit_on_error turns any ERROR, also a caught one, into FATAL,
with the SQLSTATE the job chose) must not make the runner believe the session had ended idle before the
message (57P05, idle_session_timeout): the runner would hand the running job back without its attempt
counted, claim it first again, and lose its backend again, forever, while every other tenant's job in
that queue is claimed and handed back unrun. The crash keeps the crash rule: the job's attempt counts
and the other tenants' jobs run."""
from __future__ import annotations

import pytest

from conftest import connect
from tenant_logins import enqueue_as, tenant_logins

CRASH_AS_IDLE = ("SET exit_on_error = on; "
                 "DO $$ BEGIN RAISE EXCEPTION 'idle' USING ERRCODE = '57P05'; END $$")


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"mallory": "evil", "victim": "good"}) as names:
        yield names


def test_a_job_that_fakes_an_idle_timeout_cannot_stall_the_queue(db, logins, start):
    crash = enqueue_as(db, logins["mallory"], "evil", "crash", CRASH_AS_IDLE, priority=10)
    mates = [enqueue_as(db, logins["victim"], "good", f"mate {i}", "SELECT 1") for i in range(3)]
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1"))
    owner = connect(db)
    runner.wait_for(lambda r: owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                            "AND complete_status = 2", (mates,)).fetchone()[0] == len(mates),
                    what="the other tenant's jobs to run")
    assert owner.execute("SELECT attempts FROM broker.broker_jobs WHERE job_id = %s", (crash,)).fetchone() == (1,), \
        "the crashing job's attempt counted (crash rule), it was not handed back as unrun"
    owner.close()
