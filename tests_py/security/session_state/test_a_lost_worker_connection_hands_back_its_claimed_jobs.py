"""When a worker's backend is terminated while it runs a job, only that worker reconnects: the runner
keeps its instance (the listen connection and its lock) and its other workers, the jobs the worker had
claimed but not started (other tenants' here) go back to pending without an attempt counted and run, and the job that was
running alone goes back too, uncounted, the first time this runner loses a session under it (the second time its
attempt counts: tests_py/faults/test_a_job_that_kills_its_backend_still_fails.py)."""
from __future__ import annotations


import pytest

from conftest import connect
from tenant_logins import enqueue_as, tenant_logins


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"alice": None, "bob": None}, strict=False) as names:
        yield names


def test_a_terminated_worker_reconnects_alone_and_hands_back_what_it_had_not_run(db, logins, start):
    holder = connect(db)
    holder.execute("SELECT pg_advisory_lock(424242)")
    blocker = enqueue_as(db, logins["alice"], "acme", "blocked", "SELECT pg_advisory_lock_shared(424242)", priority=10)
    mates = [enqueue_as(db, logins["bob"], "globex", f"mate {i}", "SELECT 1") for i in range(4)]
    # a budget that outlasts the test: the blocked job stays in the transaction of its claim, its batch-mates claimed
    # behind it (under the 200 ms default the budget ends its wait, it runs alone and the mates are handed back
    # before a slow test sees the wait)
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1", "--batch-budget-ms", "60000", "--lease-seconds", "300"))
    owner = connect(db)

    def worker_waiting():
        return owner.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                             "AND wait_event_type = 'Lock' AND wait_event = 'advisory'").fetchone()
    runner.wait_for(lambda r: worker_waiting() is not None, what="the worker to wait in the blocked job")
    claimed = owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 1").fetchone()[0]
    assert claimed == 5, "the blocked job and its batch-mates were claimed together"
    instance = owner.execute("SELECT instance_id FROM broker.broker_queueinstance WHERE status = 'active'").fetchone()
    owner.execute("SELECT pg_terminate_backend(%s)", worker_waiting())

    runner.wait_for(lambda r: "5 claimed job(s) handed back" in r.log(), what="the worker to reconnect and hand back")
    holder.close()  # (claimed again, the blocked job would hold its new batch-mates behind it for the long budget)
    everything = [blocker, *mates]
    runner.wait_for(lambda r: owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                            "AND complete_status = 2", (everything,)).fetchone()[0] == len(everything),
                    what="every job to run after the worker reconnected")
    assert owner.execute("SELECT array_agg(attempts ORDER BY job_id) FROM broker.broker_jobs WHERE job_id = ANY(%s)",
                         (everything,)).fetchone()[0] == [1] * len(everything), \
        "neither the lost claims nor the lost run counted: one attempt each, the one that ran"
    assert owner.execute("SELECT instance_id FROM broker.broker_queueinstance WHERE status = 'active'").fetchone() \
        == instance, "the runner kept its instance and listen connection"
    log = runner.log()
    assert "worker connection lost" in log and "database unavailable" not in log
    owner.close()
