"""pg_dump / pg_restore of a database with pgsql_broker keeps jobs, schedules, mappings and policies working."""
from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from conftest import add_job, connect

# pg_dump and pg_restore of the server's own major version (an older pg_dump refuses a newer server)
pytestmark = pytest.mark.pg_dump

BIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")


@pytest.fixture
def restored_name():
    name = f"r_{uuid.uuid4().hex[:12]}"
    yield name
    with connect("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_dump_restore_round_trip(db, restored_name, tmp_path):
    with connect(db) as conn:
        conn.execute("CREATE TABLE public.out (v text)")
        first = add_job(conn, "first", "INSERT INTO public.out VALUES ('first')")
        add_job(conn, "second", "INSERT INTO public.out VALUES ('second')", depends_on_job_ids=[first])
        add_job(conn, "done", "SELECT 1", job_queue=3)
        assert conn.execute("SELECT r.complete_status FROM broker.broker_get(3) g, "
                            "LATERAL broker.broker_run(g.job_id) r").fetchall() == [(2,)]
        with conn.transaction():
            conn.execute("SELECT broker.broker_set_tenant('acme')")
            add_job(conn, "acme job", "SELECT 1", job_queue=2)
        conn.execute("INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str) "
                     "VALUES ('nightly', '0 3 * * *', 'SELECT 1')")
        conn.execute("INSERT INTO broker.broker_tenant_roles VALUES ('acme', 'broker_enqueue')")
        before = conn.execute("SELECT job_id, job_name, complete_status, pending_deps, tenant_id "
                              "FROM broker.broker_jobs ORDER BY job_id").fetchall()

    dump = tmp_path / "db.dump"
    subprocess.run([f"{BIN}/pg_dump", "-Fc", "-d", db, "-f", str(dump)], check=True)
    with connect("postgres") as admin:
        admin.execute(f'CREATE DATABASE "{restored_name}"')
    # The documented procedure: restore as a superuser with session_replication_role=replica, so the
    # bookkeeping triggers do not count the restored rows a second time.
    env = dict(os.environ, PGOPTIONS="-c session_replication_role=replica")
    restore = subprocess.run([f"{BIN}/pg_restore", "--exit-on-error", "-d", restored_name, str(dump)],
                             capture_output=True, text=True, env=env)
    assert restore.returncode == 0, restore.stderr

    with connect(restored_name) as conn:
        after = conn.execute("SELECT job_id, job_name, complete_status, pending_deps, tenant_id "
                             "FROM broker.broker_jobs ORDER BY job_id").fetchall()
        assert after == before  # every job, with its state and dependency counter
        assert conn.execute("SELECT count(*) FROM broker.broker_job_dependency").fetchone() == (1,)
        assert conn.execute("SELECT schedule_name FROM broker.broker_schedule").fetchall() == [("nightly",)]
        assert conn.execute("SELECT tenant_id, role_name FROM broker.broker_tenant_roles").fetchall() == [
            ("acme", "broker_enqueue")]
        assert conn.execute("SELECT count(*) FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid "
                            "WHERE c.relnamespace = 'broker'::regnamespace").fetchone()[0] >= 10
        assert conn.execute("SELECT bool_and(relrowsecurity AND relforcerowsecurity) FROM pg_class "
                            "WHERE relnamespace = 'broker'::regnamespace AND relkind = 'r'").fetchone() == (True,)

        # the restored broker works: the dependency gate, the executor, the identity sequence
        conn.execute("SET ROLE broker_runtime")
        ran = conn.execute("SELECT g.job_name FROM broker.broker_get(1, NULL, 60, 10) g, "
                           "LATERAL broker.broker_run(g.job_id, g.lease_token) r").fetchall()
        assert ran == [("first",)]
        ran = conn.execute("SELECT g.job_name FROM broker.broker_get(1, NULL, 60, 10) g, "
                           "LATERAL broker.broker_run(g.job_id, g.lease_token) r").fetchall()
        assert ran == [("second",)]
        conn.execute("RESET ROLE")
        assert [r[0] for r in conn.execute("SELECT v FROM public.out ORDER BY 1")] == ["first", "second"]
        new_id = add_job(conn, "after restore", "SELECT 1")
        assert new_id > max(row[0] for row in before)

        # row-level security still scopes an enqueuing role
        conn.execute("SET ROLE broker_enqueue")
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs").fetchone() == (4,)  # tenant default
        conn.execute("RESET ROLE")
