"""A job can tie a persistent object of its role to a temporary one in the worker's session (a column
default of its own table calling nextval on a temporary sequence). The runner's reset after the
transaction (DISCARD TEMP) then drops that default too, which needs an ACCESS EXCLUSIVE lock on the
persistent table: the role's own second session, queued on that table while the job ran, holds it from
the job's COMMIT on, and the worker waits in its reset (no timeout there) for as long as that session
likes, claiming nothing: every other tenant's job in the queue stalls. No session of an enqueuer may hold
what the worker's reset or claim waits for."""
from __future__ import annotations

import pytest

from conftest import connect
from tenant_logins import enqueue_as, tenant_logins


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"mallory": "evil", "victim": "good"}) as names:
        yield names


def test_a_session_of_the_enqueuer_cannot_hold_the_worker_in_its_reset(db, logins, start):
    with connect(db, user=logins["mallory"]) as conn:  # a table of its own, in the one schema it may create in
        schema = conn.execute("SELECT split_part(broker.broker_create_executor(current_user)::text, '.', 1)"
                              ).fetchone()[0]
        conn.execute(f"CREATE TABLE {schema}.anchor (i integer)")
    table = f"{schema}.anchor"
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    enqueue_as(db, logins["mallory"], "evil", "tie", "CREATE TEMP SEQUENCE s; "
            f"ALTER TABLE {table} ALTER COLUMN i SET DEFAULT nextval('pg_temp.s'); SELECT pg_sleep(1)")
    owner = connect(db)
    runner.wait_for(lambda r: owner.execute("SELECT 1 FROM pg_locks WHERE relation = %s::regclass "
                                            "AND mode = 'AccessExclusiveLock' AND granted", (table,)).fetchone(),
                    what="the job to hold its table")
    mallory = connect(db, user=logins["mallory"], autocommit=False)
    mallory.execute(f"LOCK TABLE {table} IN ACCESS SHARE MODE")  # granted at the job's COMMIT, then held
    try:
        mates = [enqueue_as(db, logins["victim"], "good", f"mate {i}", "SELECT 1") for i in range(3)]
        runner.wait_for(lambda r: owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                                "AND complete_status = 2", (mates,)).fetchone()[0] == len(mates),
                        what="the other tenant's jobs to run while the enqueuer's session holds its table")
    finally:
        mallory.rollback()
        mallory.close()
        owner.close()
