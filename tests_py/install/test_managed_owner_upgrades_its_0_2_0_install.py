"""The managed-like login (owner with CREATEROLE, no superuser, no BYPASSRLS) upgrades its own 0.2.0 install
(tracked migrations, the only path it has) to this version: every tenant's jobs and dependencies are kept,
though row-level security alone would show it the default tenant's only; then --with-roles and --verify-only
find the package's catalog. (Schedules: test_upgrade_from_0_2_0_keeps_jobs_running.py; before its roles are
applied, 0.2.0 takes none from this login.)"""
from __future__ import annotations

from conftest import connect
from managed_login import cli, managed_owner, owner_dsn
from pgsql_broker.install import install
from pgsql_broker.install.scripts import control_version

ROWS = ("SELECT tenant_id, job_name, complete_status, pending_deps FROM broker.broker_jobs ORDER BY 1, 2",
        "SELECT d.tenant_id, j.job_name, d.depends_on_group FROM broker.broker_job_dependency AS d "
        "JOIN broker.broker_jobs AS j USING (job_id) ORDER BY 1, 2")


def test_the_owner_upgrades_its_0_2_0_install_in_every_tenant(template_db):
    with managed_owner() as (db, owner):
        dsn = owner_dsn(db, owner)
        install(dsn, no_extension=True, target="0.2.0", log=lambda msg: None)
        with connect(db, user=owner, autocommit=False) as conn:  # 0.2.0 data in two tenants, as the owner
            for tenant in ("default", "acme"):
                conn.execute("SELECT broker.broker_set_tenant(%s)", (tenant,))
                conn.execute("SELECT broker.broker_add_job(%s, 'SELECT 1', p_job_group => 'g')", (f"first of {tenant}",))
                conn.execute("SELECT broker.broker_add_job(%s, 'SELECT 2', p_depends_on_groups => ARRAY['g'])",
                             (f"then of {tenant}",))
            conn.commit()
        with connect(db) as conn:  # the superuser sees every tenant
            before = [conn.execute(q).fetchall() for q in ROWS]
        assert {r[0] for r in before[0]} == {"default", "acme"} and len(before[1]) == 2

        result = cli("install", "--dsn", dsn)
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert f"applying migration pgsql_broker--0.2.0--{control_version()}" in result.stdout
        with connect(db) as conn:
            assert [conn.execute(q).fetchall() for q in ROWS] == before, "the upgrade reached every tenant"
            assert conn.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'broker'::regnamespace "
                                "AND relkind = 'r' AND NOT relforcerowsecurity").fetchone() == (0,), \
                "every broker table forces row-level security again"
        assert cli("install", "--dsn", dsn, "--with-roles", "--admin-user", owner).returncode == 0
        verify = cli("install", "--verify-only", "--dsn", dsn)
        assert verify.returncode == 0 and "OK: up to date" in verify.stdout, verify.stdout + verify.stderr
