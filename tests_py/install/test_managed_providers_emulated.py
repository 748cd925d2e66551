"""The owner role of each large managed service, EMULATED on a real server of this suite's version (the PGBIN
that .ci/with-cluster exports): its attributes and memberships as the provider documents them, made here by
the test's superuser, never the provider's own server. As that owner, with no superuser step at all,
`pgsql-broker install --no-extension --with-roles` installs and makes the roles; no broker role gets
SUPERUSER, BYPASSRLS or REPLICATION; then a runner logging in as a member of broker_runtime runs a job that a
member of broker_enqueue enqueued under strict tenancy, and an enqueuer of another tenant sees none of it.
One cluster for all: the providers take turns, each with its own database, and their roles are dropped after
each (roles are cluster-wide). docs/install.md has the recipe of each."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from own_cluster import OwnCluster
from runner_process import free_port

CLI = [sys.executable, "-m", "pgsql_broker"]
RUNNER = [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()"]

# provider: (its owner login, what the superuser runs to emulate it: {owner} and {db} filled in)
PROVIDERS = {
    # RDS/Aurora: the master user is NOSUPERUSER CREATEDB CREATEROLE and a member of rds_superuser, which holds
    # predefined roles such as pg_monitor and pg_signal_backend
    "rds": ("rds_master", ["CREATE ROLE rds_superuser NOLOGIN",
                           "GRANT pg_monitor, pg_signal_backend TO rds_superuser",
                           "CREATE ROLE {owner} LOGIN NOSUPERUSER CREATEDB CREATEROLE IN ROLE rds_superuser"]),
    # Cloud SQL: the postgres user is LOGIN CREATEDB CREATEROLE, a member of cloudsqlsuperuser (no SUPERUSER,
    # no REPLICATION)
    "cloudsql": ("cloudsql_postgres", ["CREATE ROLE cloudsqlsuperuser NOLOGIN CREATEDB CREATEROLE",
                                       "CREATE ROLE {owner} LOGIN CREATEDB CREATEROLE IN ROLE cloudsqlsuperuser"]),
    # Azure Flexible Server: the admin is LOGIN CREATEDB CREATEROLE, a member of azure_pg_admin (which holds
    # pg_monitor and pg_signal_backend)
    "azure": ("azure_admin", ["CREATE ROLE azure_pg_admin NOLOGIN",
                              "GRANT pg_monitor, pg_signal_backend TO azure_pg_admin",
                              "CREATE ROLE {owner} LOGIN CREATEDB CREATEROLE IN ROLE azure_pg_admin"]),
    # Supabase: postgres is NOSUPERUSER INHERIT CREATEROLE CREATEDB LOGIN REPLICATION BYPASSRLS (its role setup
    # script); named supabase_postgres here, since this cluster's superuser is postgres
    "supabase": ("supabase_postgres", ["CREATE ROLE {owner} LOGIN NOSUPERUSER INHERIT CREATEROLE CREATEDB REPLICATION "
                                       "BYPASSRLS"]),
    # Neon: neon_superuser is NOLOGIN CREATEDB CREATEROLE REPLICATION BYPASSRLS; compute_ctl creates the project's
    # roles INHERIT CREATEROLE CREATEDB BYPASSRLS REPLICATION IN ROLE neon_superuser; the database grants it ALL
    "neon": ("neon_owner", ["CREATE ROLE neon_superuser NOLOGIN CREATEDB CREATEROLE REPLICATION BYPASSRLS",
                            "CREATE ROLE {owner} LOGIN INHERIT CREATEROLE CREATEDB BYPASSRLS REPLICATION "
                            "IN ROLE neon_superuser"]),
}
PROVIDER_ROLES = ("rds_superuser", "cloudsqlsuperuser", "azure_pg_admin", "neon_superuser")
BROKER_ROLES = ("broker_admin", "broker_runtime", "broker_enqueue", "broker_retention", "broker_worker")


@pytest.fixture(scope="module")
def server():
    own = OwnCluster(max_connections=30, port=free_port())
    try:
        yield own
    finally:
        own.stop()


def _dsn(own: OwnCluster, db: str, user: str) -> str:
    return f"host={own.dir} port={own.port} dbname={db} user={user}"


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"PG_PASS": "unused-with-trust"}


def _connect(own: OwnCluster, db: str, user: str) -> psycopg.Connection:
    return psycopg.connect(_dsn(own, db, user), autocommit=True)


@pytest.fixture
def provider(server, request):
    """The emulated owner of request.param and its database; afterwards the database and every role made."""
    name = request.param
    owner, setup = PROVIDERS[name]
    db = f"d_{name}"
    with server.connect() as admin:
        for statement in setup:
            admin.execute(statement.format(owner=owner, db=db))
        admin.execute(f"CREATE DATABASE {db} OWNER {owner}")
        if name == "neon":
            admin.execute(f"GRANT ALL ON DATABASE {db} TO neon_superuser")
    try:
        yield name, owner, db
    finally:
        with server.connect() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            for (role,) in admin.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'app\\_%' OR "
                                         "rolname LIKE 'runner\\_%'").fetchall():
                admin.execute(f'DROP ROLE "{role}"')
            for role in (*BROKER_ROLES, owner, *PROVIDER_ROLES):
                admin.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.parametrize("provider", list(PROVIDERS), indirect=True)
def test_an_emulated_provider_owner_installs_and_runs_a_tenants_job_without_a_superuser(server, provider, tmp_path):
    name, owner, db = provider
    result = subprocess.run([*CLI, "install", "--dsn", _dsn(server, db, owner), "--no-extension", "--with-roles",
                             "--admin-user", owner], capture_output=True, text=True, env=_env(),
                            stdin=subprocess.DEVNULL, timeout=180)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "roles broker_admin, broker_runtime, broker_enqueue created or updated" in result.stdout
    assert "pg_signal_backend: not granted" in result.stdout  # (the one line on it)
    with server.connect() as admin:
        assert admin.execute("SELECT count(*) FROM pg_roles WHERE rolname = ANY (%s) "
                             "AND NOT (rolsuper OR rolbypassrls OR rolreplication)", (list(BROKER_ROLES),)).fetchone() == (5,)
    with server.connect(db) as conn:
        assert conn.execute("SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = c.oid "
                            "AND p.polname = 'broker_admin_all')), count(*) FILTER (WHERE NOT c.relforcerowsecurity) "
                            "FROM pg_class c WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind = 'r'"
                            ).fetchone() == (0, 0)  # each table: the owner's policy, and FORCE ROW LEVEL SECURITY

    runner_login, app, other = f"runner_{name}", f"app_{name}", f"app_{name}_other"
    with _connect(server, db, owner) as conn:  # all of it as the owner: nothing of a superuser
        conn.execute(f"CREATE ROLE {runner_login} LOGIN IN ROLE broker_runtime")
        conn.execute(f"CREATE ROLE {app} LOGIN IN ROLE broker_enqueue")
        conn.execute(f"CREATE ROLE {other} LOGIN IN ROLE broker_enqueue")
        conn.execute("SELECT broker.broker_set_strict_tenancy(true)")
        conn.execute("INSERT INTO broker.broker_tenant_roles VALUES ('acme', %s), ('globex', %s)", (app, other))
        conn.execute("CREATE TABLE public.hello (msg text)")
        conn.execute(f"GRANT INSERT, SELECT ON public.hello TO {app}")
    with _connect(server, db, app) as conn, conn.transaction():  # (the tenant holds for one transaction)
        conn.execute("SELECT broker.broker_set_tenant('acme')")
        job = conn.execute("SELECT job_id FROM broker.broker_add_job('hello', "
                           "$$INSERT INTO public.hello VALUES ('from a job')$$)").fetchone()[0]
    for tenant in ("globex", "acme"):  # another tenant's enqueuer, in its tenant and naming acme (not mapped to it)
        with _connect(server, db, other) as conn, conn.transaction():
            conn.execute("SELECT broker.broker_set_tenant(%s)", (tenant,))
            assert conn.execute("SELECT count(*) FROM broker.broker_jobs").fetchone() == (0,), tenant

    log = tmp_path / "runner.log"
    with log.open("w") as out:
        runner = subprocess.Popen([*RUNNER, "--dsn", _dsn(server, db, runner_login), "--no-metrics", "--log-format",
                                   "text"], env=_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120  # a loaded CI machine
        with server.connect(db) as conn:
            while conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                               (job,)).fetchone() != (2,):
                assert runner.poll() is None and time.monotonic() < deadline, _text(log)
                time.sleep(0.1)
            assert conn.execute("SELECT msg FROM public.hello").fetchall() == [("from a job",)]
            assert conn.execute("SELECT tenant_id, run_as FROM broker.broker_jobs WHERE job_id = %s",
                                (job,)).fetchone() == ("acme", app)
    finally:
        runner.terminate()
        try:
            runner.wait(60)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait(10)
    assert runner.returncode == 0, _text(log)


def _text(log: Path) -> str:
    return log.read_text() if log.exists() else ""
