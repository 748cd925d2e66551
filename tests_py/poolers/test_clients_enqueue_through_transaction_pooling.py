"""Enqueueing through PgBouncer in transaction pooling (Debian 12's 1.18), as docs/poolers.md says to:
the tenant set in the same transaction as the enqueue (broker_set_tenant is transaction-local), psycopg
with prepare_threshold=None, psql as it is. Four clients share two server connections, so that a tenant
carried over on a server connection would put jobs in the wrong tenant."""
from __future__ import annotations

import os
import subprocess
import threading

from conftest import connect
from pgbouncer import give_passwords, password_for, pgbouncer  # noqa: F401 (the fixture)
from tenant_logins import tenant_logins

TENANTS = {"a": "tenant_a", "b": "tenant_b", "c": "tenant_c", "d": "tenant_d"}
PER_CLIENT = 40


def _enqueue_many(bouncer, user: str, tenant: str, errors: list) -> None:
    try:
        with bouncer.connect("jobs_tx", user, autocommit=False) as conn:
            for i in range(PER_CLIENT):
                conn.execute("SELECT broker.broker_set_tenant(%s)", (tenant,))
                conn.execute("SELECT broker.broker_add_job(%s, 'SELECT 1', p_job_queue => %s)",
                             (f"{tenant}-{i}", 1 + i % 3))
                conn.commit()
    except Exception as exc:  # reported by the test thread
        errors.append(exc)


def test_four_clients_enqueue_into_their_tenants_through_transaction_pooling(db, pgbouncer):
    with tenant_logins(db, {"app": None}, runtime=()) as names:
        app = names["app"]
        with connect(db) as owner:
            for tenant in TENANTS.values():
                owner.execute("INSERT INTO broker.broker_tenant_roles VALUES (%s, %s)", (tenant, app))
        give_passwords(app)
        bouncer = pgbouncer({"jobs_tx": (db, "transaction")}, default_pool_size=2)
        errors: list = []
        threads = [threading.Thread(target=_enqueue_many, args=(bouncer, app, tenant, errors))
                   for k, tenant in TENANTS.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        # psql, one transaction per client session, as a shell script would
        script = ("BEGIN;\nSELECT broker.broker_set_tenant('tenant_b');\n"
                  "SELECT broker.broker_add_job('tenant_b-psql', 'SELECT 1');\nCOMMIT;\n")
        done = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", bouncer.dsn("jobs_tx", app)],
                              input=script, text=True, capture_output=True, timeout=60,
                              env={**os.environ, "PGPASSWORD": password_for(app)})
        assert done.returncode == 0, done.stderr
        with connect(db) as owner:
            rows = owner.execute("SELECT tenant_id, split_part(job_name, '-', 1), enqueued_by, count(*) "
                                 "FROM broker.broker_jobs GROUP BY 1, 2, 3 ORDER BY 1").fetchall()
            servers = owner.execute("SELECT count(DISTINCT pid) FROM pg_stat_activity WHERE datname = %s "
                                    "AND usename = %s", (db, app)).fetchone()[0]
        expected = [(tenant, tenant, app, PER_CLIENT + (1 if k == "b" else 0)) for k, tenant in TENANTS.items()]
        assert rows == sorted(expected)
        assert servers <= 2  # the four clients took turns on the pool's two server connections
