"""Shared checks of tests that wait for jobs: whether a job finished, waiting for a condition, and the
recount of every job's pending dependency counter."""
from __future__ import annotations

import time

from conftest import connect

# Jobs whose pending_deps differs from a recount of their unfinished dependencies (none when quiescent).
COUNTER_DRIFT = """
SELECT j.job_id, j.pending_deps, actual
  FROM broker.broker_jobs j,
       LATERAL (SELECT (SELECT count(*) FROM broker.broker_job_dependency e
                          JOIN broker.broker_jobs t ON t.job_id = e.depends_on_job_id
                         WHERE e.job_id = j.job_id AND t.complete_status <= 1)
                     + (SELECT count(*) FROM broker.broker_job_dependency e
                          JOIN broker.broker_jobs m ON m.tenant_id = e.tenant_id AND m.job_group = e.depends_on_group
                         WHERE e.job_id = j.job_id AND m.complete_status <= 1) AS actual) a
 WHERE j.complete_status = 0 AND j.pending_deps <> a.actual
"""


def finished(db: str, job_id: int) -> bool:
    with connect(db) as conn:
        return conn.execute("SELECT complete_status >= 2 FROM broker.broker_jobs WHERE job_id = %s",
                            (job_id,)).fetchone()[0]


def wait_until(predicate, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
