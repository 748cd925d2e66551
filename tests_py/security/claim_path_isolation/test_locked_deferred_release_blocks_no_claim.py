"""A tenant that row-locks one of its own jobs listed in broker_deferred_release (its UPDATE (cancel_reason)
grant allows SELECT ... FOR UPDATE) blocks no claim of any queue, nor the release of another tenant's
dependents; and a real runner applies the deferred releases itself. Real logins, strict tenancy; the claims
run under statement_timeout and must not time out."""
from __future__ import annotations

import json

import psycopg
import pytest

from conftest import connect
from tenant_logins import tenant_logins
from job_checks import wait_until


@pytest.fixture
def tenants(db):
    """alice (tenant_a) and bob (tenant_b), enqueue logins under strict tenancy, and a runtime login."""
    with tenant_logins(db, {"alice": "tenant_a", "bob": "tenant_b"}) as names:
        yield names


def _fan_in(db: str, user: str, tenant: str, n: int) -> None:
    """A member of group big (queue 1) and n dependents of the group (queue 2), enqueued as user."""
    with connect(db, user=user) as conn:
        conn.execute("SELECT set_config('broker.tenant_id', %s, false)", (tenant,))
        conn.execute("SELECT broker.broker_add_job('member', 'SELECT 1', 1, p_job_group => 'big')")
        jobs = [{"job_name": f"dep {i}", "execute_str": "SELECT 1", "job_queue": 2, "depends_on_groups": ["big"]}
                for i in range(n)]
        conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s::jsonb)", (json.dumps(jobs),))


def _deferred(db: str) -> dict[str, int]:
    with connect(db) as owner:
        return dict(owner.execute("SELECT tenant_id, sum(cardinality(job_ids))::int FROM broker.broker_deferred_release "
                                  "GROUP BY tenant_id").fetchall())


def _complete_members(runner: psycopg.Connection) -> None:
    """The runtime completes both members (queue 1): 500 dependents each released at once, 100 deferred."""
    done = runner.execute("SELECT r.complete_status FROM broker.broker_get(1, NULL, 60, 2) AS g, "
                          "LATERAL broker.broker_run(g.job_id, g.lease_token) AS r").fetchall()
    assert done == [(2,), (2,)]


def test_a_row_locked_deferred_release_blocks_no_claim_and_no_other_tenants_release(db, tenants):
    _fan_in(db, tenants["alice"], "tenant_a", 600)
    _fan_in(db, tenants["bob"], "tenant_b", 600)
    runner = connect(db, user=tenants["runner"])
    _complete_members(runner)
    assert _deferred(db) == {"tenant_a": 100, "tenant_b": 100}

    alice = connect(db, user=tenants["alice"], autocommit=False)
    alice.execute("SELECT broker.broker_set_tenant('tenant_a')")
    # (alice cannot read the list; she knows her dependents past the 500th by id are on it)
    with connect(db) as owner:
        listed = owner.execute("SELECT job_ids[1] FROM broker.broker_deferred_release "
                               "WHERE tenant_id = 'tenant_a'").fetchone()[0]
    alice.execute("SELECT job_id FROM broker.broker_jobs WHERE job_id = %s FOR UPDATE", (listed,))
    try:  # alice's row lock stays held
        runner.execute("SET statement_timeout = '5s'")  # a claim waiting for alice's lock fails the test
        assert runner.execute("SELECT count(*) FROM broker.broker_get(5)").fetchone() == (0,)
        assert runner.execute("SELECT count(*) FROM broker.broker_get(2, NULL, 60, 10)").fetchone() == (10,)
        # the maintenance call skips alice's row without waiting, and applies bob's
        assert runner.execute("SELECT broker.broker_apply_deferred_releases(5000)").fetchone() == (100,)
        assert _deferred(db) == {"tenant_a": 100}
    finally:
        alice.rollback()
        alice.close()
    assert runner.execute("SELECT broker.broker_apply_deferred_releases(5000)").fetchone() == (100,)
    assert _deferred(db) == {}


def test_the_runner_applies_deferred_releases_and_runs_the_released_jobs(db, tenants, start):
    _fan_in(db, tenants["bob"], "tenant_b", 700)
    runner = start(db)
    wait_until(lambda: _deferred(db) == {} and _done(db) == 701, timeout=60,
               what="the member, its 500 dependents released at once and the 200 deferred ones, all run")
    assert runner.proc.poll() is None


def _done(db: str) -> int:
    with connect(db) as owner:
        return owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2").fetchone()[0]
