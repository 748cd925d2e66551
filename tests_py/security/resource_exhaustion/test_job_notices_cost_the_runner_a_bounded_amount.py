"""A job's NOTICE or WARNING goes to the client as it is, whatever client_min_messages the run puts back
(the job can set it itself): one RAISE WARNING of 200 MB is read whole into the worker connection's input
buffer, which libpq never shrinks, so each such job leaves the runner that much bigger for the life of the
connection (error text is capped at 2,000 characters, notices are not). What the runner takes in from a job
must be bounded like its error text."""
from __future__ import annotations


import time

import pytest

from conftest import connect
from tenant_logins import tenant_logins

HUGE_WARNING = "DO $$ BEGIN RAISE WARNING '%', repeat('x', 200000000); END $$"


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(status.read().split("VmRSS:")[1].split()[0]) // 1024


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"mallory": "evil"}) as names:
        yield names


def test_a_huge_warning_of_a_job_does_not_grow_the_runner(db, logins, start):
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    before = rss_mb(runner.proc.pid)
    with connect(db, user=logins["mallory"], autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant('evil')")
        job = conn.execute("SELECT job_id FROM broker.broker_add_job('loud', %s)", (HUGE_WARNING,)).fetchone()[0]
        conn.commit()
    with connect(db) as owner:
        runner.wait_for(lambda r: owner.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                                                (job,)).fetchone()[0] >= 2, what="the loud job", timeout=60)
    # the worker gives the memory back once its transaction is over (it closes that connection)
    deadline = time.monotonic() + 20
    while (grown := rss_mb(runner.proc.pid) - before) >= 100 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert grown < 100, f"the runner stayed {grown} MB bigger for one job's warning"
