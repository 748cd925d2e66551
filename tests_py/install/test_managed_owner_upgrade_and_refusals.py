"""The managed-like login (owner with CREATEROLE, no superuser, no BYPASSRLS) upgrades its own 0.1.0 install
(every tenant's rows, not only the default tenant's, which row-level security alone would let it see); a
login lacking a right gets one line saying what is missing and how to get it, and an untouched database; a
broker_admin an earlier version made BYPASSRLS keeps working; a failed first install leaves nothing behind
(schema broker_yoyo included)."""
from __future__ import annotations

import uuid

from conftest import connect
from managed_login import cli, managed_owner, one_error_line, owner_dsn, schemas
from own_cluster import ROLES_SQL
from pgsql_broker.install import install


def test_the_owner_upgrades_its_0_1_0_install_in_every_tenant(template_db):
    with managed_owner() as (db, owner):
        dsn = owner_dsn(db, owner)
        install(dsn, no_extension=True, target="0.1.0", log=lambda msg: None)
        with connect(db, user=owner, autocommit=False) as conn:  # 0.1.0 data in two tenants, as the owner
            for tenant in ("default", "acme"):
                conn.execute("SELECT broker.broker_set_tenant(%s)", (tenant,))
                conn.execute("SELECT broker.broker_add_job(%s, 'SELECT 1')", (f"job of {tenant}",))
                conn.execute("INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, run_as) "
                             "VALUES (%s, '0 3 * * *', 'SELECT 1', current_user)", (f"schedule of {tenant}",))
            conn.commit()
        result = cli("install", "--dsn", dsn)
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert "applying migration pgsql_broker--0.1.0--0.2.0" in result.stdout
        with connect(db) as conn:
            assert conn.execute("SELECT tenant_id, enabled, created_by = %s, last_error IS NOT NULL "
                                "FROM broker.broker_schedule ORDER BY 1", (owner,)).fetchall() == [
                ("acme", False, True, True), ("default", False, True, True)], "the upgrade reached every tenant"
            assert conn.execute("SELECT tenant_id, interruptions FROM broker.broker_jobs ORDER BY 1").fetchall() == [
                ("acme", 0), ("default", 0)]
            assert conn.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'broker'::regnamespace "
                                "AND relkind = 'r' AND NOT relforcerowsecurity").fetchone() == (0,), \
                "every broker table forces row-level security again"
        assert cli("install", "--dsn", dsn, "--with-roles", "--admin-user", owner).returncode == 0
        verify = cli("install", "--verify-only", "--dsn", dsn)
        assert verify.returncode == 0 and "OK: up to date" in verify.stdout, verify.stdout + verify.stderr


def test_an_owner_without_createrole_is_told_what_is_missing_and_nothing_changes(template_db):
    with managed_owner(createrole=False) as (db, owner):
        line = one_error_line(cli("install", "--dsn", owner_dsn(db, owner), "--with-roles", "--admin-user", owner))
        assert f"{owner} may not create or alter roles (it has neither CREATEROLE nor superuser)" in line
        assert f"ALTER ROLE {owner} CREATEROLE" in line
        assert schemas(db) == ["public"]


def test_a_bypassrls_broker_admin_of_an_earlier_version_keeps_working_until_a_superuser_takes_it_away(template_db):
    """Before 0.3.0 a superuser made broker_admin BYPASSRLS: the owner's --with-roles keeps it (only a superuser
    can take it away) and says so in one line; roles.sql run by a superuser takes it away."""
    with connect("postgres") as admin:
        admin.execute("ALTER ROLE broker_admin BYPASSRLS")
    try:
        with managed_owner() as (db, owner):
            result = cli("install", "--dsn", owner_dsn(db, owner), "--with-roles", "--admin-user", owner)
            assert result.returncode == 0, (result.stdout, result.stderr)
            assert "broker_admin still has BYPASSRLS, which it no longer needs" in result.stdout
            with connect(db) as conn:
                assert conn.execute("SELECT rolbypassrls FROM pg_roles WHERE rolname = 'broker_admin'").fetchone() == (True,)
                conn.execute(ROLES_SQL)
                assert conn.execute("SELECT rolbypassrls FROM pg_roles WHERE rolname = 'broker_admin'").fetchone() == (False,)
                assert conn.execute("SELECT count(*) FROM pg_policy WHERE polname = 'broker_admin_all'").fetchone()[0] > 0
    finally:
        with connect("postgres") as admin:
            admin.execute("ALTER ROLE broker_admin NOBYPASSRLS")


def test_a_failed_first_install_leaves_nothing_behind(template_db):
    """roles.sql refuses an executor schema another role planted (after the schema was installed): the
    whole install is undone, broker_yoyo too; the planted schema stays its owner's."""
    with managed_owner() as (db, owner):
        squatter = f"sq_{owner[2:]}"
        with connect("postgres") as admin:
            admin.execute(f'CREATE ROLE "{squatter}" LOGIN')
            victim = admin.execute("SELECT oid FROM pg_roles WHERE rolname = 'broker_enqueue'").fetchone()[0]
        with connect(db, user=owner) as conn:
            conn.execute(f'GRANT CREATE ON DATABASE "{db}" TO "{squatter}"')
        with connect(db, user=squatter) as conn:
            conn.execute(f'CREATE SCHEMA "broker_exec_{victim}"')
        result = cli("install", "--dsn", owner_dsn(db, owner), "--no-extension", "--with-roles", "--admin-user", owner)
        line = one_error_line(result)
        assert f"broker_exec_{victim}" in line
        assert "what it had made is dropped" in result.stdout
        assert schemas(db) == [f"broker_exec_{victim}", "public"]


def test_a_login_that_may_not_create_schemas_gets_one_line_and_an_untouched_database(empty_db):
    login = f"nobody_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" LOGIN')
    try:
        line = one_error_line(cli("install", "--dsn", owner_dsn(empty_db, login), "--no-extension"))
        assert "permission denied for database" in line and "42501" in line
        assert schemas(empty_db) == ["public"]
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP ROLE "{login}"')
