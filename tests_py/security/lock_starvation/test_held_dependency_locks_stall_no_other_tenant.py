"""A tenant that holds its dependency locks in an open transaction stalls no other tenant: another tenant's
enqueues and the runtime's completion of another tenant's job never wait for them. Real logins, strict tenancy;
the waiting sessions run with lock_timeout and must not time out."""
from __future__ import annotations


import psycopg
import pytest

from conftest import connect
from tenant_logins import tenant_logins


@pytest.fixture
def tenants(db):
    """alice (tenant_a) and bob (tenant_b), enqueue logins under strict tenancy, and a runtime login."""
    with tenant_logins(db, {"alice": "tenant_a", "bob": "tenant_b"}) as names:
        yield names


def _as(db: str, user: str, tenant: str | None = None) -> psycopg.Connection:
    conn = connect(db, user=user)
    conn.execute("SET lock_timeout = '3s'")  # a wait for another tenant's lock fails the test
    if tenant:
        conn.execute("SELECT set_config('broker.tenant_id', %s, false)", (tenant,))
    return conn


def test_a_tenant_holding_its_dependency_locks_stalls_no_other_tenant(db, tenants):
    bob = _as(db, tenants["bob"], "tenant_b")
    member = bob.execute("SELECT job_id FROM broker.broker_add_job('b member', 'SELECT 1', 3, "
                         "p_job_group => 'etl')").fetchone()[0]

    # alice's group names, picked (as an attacker can, offline) to fall into the buckets that bob's group etl
    # and bob's report's own group used to share with every tenant; at most the 100 groups a job may wait on
    alice = connect(db, user=tenants["alice"], autocommit=False)
    alice.execute("SELECT broker.broker_set_tenant('tenant_a')")
    names = [r[0] for r in alice.execute(
        "SELECT 'g' || i FROM generate_series(1, 200000) AS i "
        "WHERE hashtext('tenant_a' || E'\\x1f' || 'g' || i) & 1023 "
        "      IN (hashtext('tenant_b' || E'\\x1f' || 'etl') & 1023, hashtext('tenant_b' || E'\\x1f' || 'b report') & 1023) "
        "LIMIT 100").fetchall()]
    assert len(names) == 100
    alice.execute("SELECT broker.broker_add_job('a hog', 'SELECT 1', 4, p_depends_on_groups => %s)", (names,))
    try:  # alice's transaction stays open, holding every lock her enqueue took
        bob.execute("SELECT broker.broker_add_job('b member 2', 'SELECT 1', 3, p_job_group => 'etl')")
        bob.execute("SELECT broker.broker_add_job('b report', 'SELECT 1', 3, p_depends_on_groups => ARRAY['etl'])")
        bob.execute("SELECT broker.broker_add_job('b by id', 'SELECT 1', 3, p_depends_on_job_ids => ARRAY[%s::bigint])",
                    (member,))

        runner = _as(db, tenants["runner"])
        ran = runner.execute("SELECT g.job_name, r.complete_status FROM broker.broker_get(3, NULL, 60, 1) AS g, "
                             "LATERAL broker.broker_run(g.job_id, g.lease_token) AS r").fetchall()
        assert ran == [("b member", 2)]
        with connect(db) as owner:
            pending = dict(owner.execute("SELECT job_name, pending_deps FROM broker.broker_jobs "
                                         "WHERE tenant_id = 'tenant_b'").fetchall())
        assert pending == {"b member": 0, "b member 2": 0, "b report": 1, "b by id": 0}
    finally:
        alice.rollback()
        alice.close()
