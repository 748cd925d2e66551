"""The per-tenant schedule quota (max_schedules_per_tenant) is a bound on the tick's work, so it must hold
however the tenant's roles write: also from several sessions whose snapshots predate each other's commits
(REPEATABLE READ: the count after the quota lock does not see what committed since the snapshot), and no
other tenant may hold the lock that serialises the count (the advisory functions are open to every role,
and revoking them would stop the enqueuers' own schedule writes, which take the lock as the writer)."""
from __future__ import annotations

import psycopg
import pytest

from conftest import connect
from tenant_logins import tenant_logins


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"mallory": "evil", "victim": "good"}, runtime=()) as names:
        with connect(db) as owner:
            owner.execute("SELECT broker.broker_set('max_schedules_per_tenant', '2')")
        yield names


def test_sessions_with_older_snapshots_cannot_exceed_the_quota(db, logins):
    with connect(db, user=logins["mallory"]) as conn:  # its executor exists (as after its first job)
        conn.execute("SELECT broker.broker_create_executor(current_user)")
    sessions = []
    for _ in range(3):
        conn = connect(db, user=logins["mallory"], autocommit=False)
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT broker.broker_set_tenant('evil')")
        conn.execute("SELECT count(*) FROM broker.broker_schedule")  # the snapshot, before any commit
        sessions.append(conn)
    for i, conn in enumerate(sessions):
        try:
            for k in range(2):
                conn.execute("SELECT broker.broker_add_schedule(%s, '* * * * *', 'SELECT 1')", (f"s{i}_{k}",))
            conn.commit()
        except psycopg.Error:
            conn.rollback()  # refused (the quota): nothing of this session's
        conn.close()
    with connect(db) as owner:
        count = owner.execute("SELECT count(*) FROM broker.broker_schedule WHERE tenant_id = 'evil'").fetchone()[0]
    assert count <= 2, f"tenant evil holds {count} schedules, quota 2"


def test_another_tenant_cannot_hold_the_quota_lock(db, logins):
    with connect(db, user=logins["mallory"], autocommit=False) as mallory, \
         connect(db, user=logins["victim"], autocommit=False) as victim:
        # the key the quota once serialised on (any role may take an advisory lock), and the count row itself
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            mallory.execute("SELECT 1 FROM broker.broker_schedule_count FOR UPDATE")
        mallory.rollback()
        mallory.execute("SELECT pg_advisory_xact_lock(hashtext('broker_schedule_quota'), hashtext('good'))")
        victim.execute("SET lock_timeout = '5s'")
        victim.execute("SELECT broker.broker_set_tenant('good')")
        try:
            victim.execute("SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'SELECT 1')")
        except psycopg.errors.LockNotAvailable:
            pytest.fail("tenant good's schedule write waited on a lock held by tenant evil")
        victim.commit()
        mallory.rollback()
