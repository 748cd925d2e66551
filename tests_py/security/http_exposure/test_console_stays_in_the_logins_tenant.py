"""A tenant's console (console_dsn: a broker_enqueue login mapped to its tenant, strict tenancy on) reaches no other
tenant's jobs through what landed with the console's links, counts, workflow picture, actions list and schedules
panel, whatever tenant its requests name: the list and its count are empty, a job and its picture are 404, the
schedules are none, and a schedule's Run now, Pause and Resume answer 404 (a schedule the login cannot see does not
exist for it: 42704, which used to be a 500) and change nothing."""
from __future__ import annotations

import json

from conftest import connect
from pgsql_broker.observe.console import ConsoleDatabase
from pgsql_broker.observe.console_api import ConsoleAPI
from runner_process import db_dsn
from tenant_logins import enqueue_as, tenant_logins

TOKEN = "s3cret-console-token-0123456789"
HEADERS = {"Content-Type": "application/json", "Host": "127.0.0.1:1", "Authorization": "Bearer " + TOKEN}


def test_another_tenants_jobs_graph_and_schedules_stay_out_of_reach(db):
    with tenant_logins(db, {"acme": "acme", "evil": "evil"}) as names:
        first = enqueue_as(db, names["acme"], "acme", "acme extract", "SELECT 1")
        with connect(db, user=names["acme"], autocommit=False) as conn:
            conn.execute("SELECT broker.broker_set_tenant('acme')")
            conn.execute("SELECT broker.broker_add_job('acme load', 'SELECT 1', p_depends_on_job_ids => ARRAY[%s]::bigint[])",
                         (first,))
            conn.execute("SELECT broker.broker_add_schedule('acme nightly', '0 3 * * *', 'SELECT 1')")
            conn.commit()
        evil = ConsoleAPI([ConsoleDatabase("d", db_dsn(db), db_dsn(db, names["evil"]), "test")], TOKEN)

        def get(target: str) -> tuple[int, dict]:
            reply = evil.handle("GET", target, HEADERS)
            return reply.status, json.loads(reply.body)
        for tenant in ("", "acme"):
            status, body = get(f"/api/jobs?tenant={tenant}&name=acme")
            assert (status, body["jobs"], body["count"]) == (200, [], 0)
            assert get(f"/api/jobs/{first}?tenant={tenant}")[0] == 404
            assert get(f"/api/jobs/{first}/graph?tenant={tenant}")[0] == 404
            assert get(f"/api/schedules?tenant={tenant}") == (200, {"database": "d", "schedules": []})
            for action in ("run-now", "pause", "resume"):
                reply = evil.handle("POST", f"/api/schedules/acme%20nightly/{action}", HEADERS,
                                    json.dumps({"tenant": tenant}).encode())
                assert reply.status == 404, (action, reply.body)
        with connect(db) as owner:
            assert owner.execute("SELECT count(*) FROM broker.broker_jobs").fetchone()[0] == 2   # no run-now job
            assert owner.execute("SELECT enabled FROM broker.broker_schedule").fetchone()[0] is True
