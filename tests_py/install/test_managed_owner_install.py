"""A database owner with CREATEROLE and without superuser or BYPASSRLS (managed PostgreSQL) installs by
both paths, with and without --with-roles; then a runner logging in as broker_runtime runs a job enqueued by
a broker_enqueue login, and --verify-only passes. (The extension files are on this server, but CREATE
EXTENSION pgsql_broker needs a superuser: the extension is not trusted, docs/install.md, so the login
gets the same scripts as tracked migrations.)"""
from __future__ import annotations

import signal

import pytest

from conftest import connect
from managed_login import cli, managed_owner, owner_dsn, schemas

SECRETS = {"BROKER_ADMIN_PASSWORD": "adm-m-1", "BROKER_RUNTIME_PASSWORD": "run-m-2", "BROKER_ENQUEUE_PASSWORD": "enq-m-3"}


def _no_privilege(owner: str) -> None:
    with connect("postgres") as admin:
        assert admin.execute("SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = %s",
                             (owner,)).fetchone() == (False, False, True)


@pytest.mark.parametrize("roles", ["with --with-roles", "then --with-roles"])
@pytest.mark.parametrize("flags", [("--no-extension",), ()], ids=["--no-extension", "extension files present"])
def test_a_createrole_owner_installs_and_a_runtime_login_runs_an_enqueue_logins_job(template_db, start, flags, roles):
    with managed_owner() as (db, owner):
        _no_privilege(owner)
        dsn = owner_dsn(db, owner)
        with_roles = ("--with-roles", "--admin-user", owner, "--set-passwords")
        if roles == "with --with-roles":
            result = first = cli("install", "--dsn", dsn, *flags, *with_roles, env=SECRETS)
        else:
            first = cli("install", "--dsn", dsn, *flags)
            assert first.returncode == 0, first.stderr
            result = cli("install", "--dsn", dsn, *with_roles, env=SECRETS)
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert "cluster-wide" in result.stdout  # the databases sharing the roles are named first
        assert "roles broker_admin, broker_runtime, broker_enqueue created or updated" in result.stdout
        if not flags:
            assert "CREATE EXTENSION pgsql_broker needs a superuser" in first.stdout
        _no_privilege(owner)  # it gained no attribute
        with connect(db) as conn:
            assert conn.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'broker'").fetchone() == (
                "broker_admin",)
        again = cli("install", "--dsn", dsn, "--with-roles", "--admin-user", owner)  # now broker_admin's: still its to run
        assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr
        verify = cli("install", "--verify-only", "--dsn", dsn)
        assert verify.returncode == 0 and "OK: up to date" in verify.stdout, verify.stdout + verify.stderr

        # the owner makes the logins: one member of broker_enqueue, one of broker_runtime; a table for the job
        runner_login, app_login = f"run_{owner[2:]}", f"app_{owner[2:]}"
        with connect(db, user=owner) as conn:
            conn.execute(f'CREATE ROLE "{runner_login}" LOGIN IN ROLE broker_runtime')
            conn.execute(f'CREATE ROLE "{app_login}" LOGIN IN ROLE broker_enqueue')
            conn.execute("CREATE TABLE public.hello (msg text)")
            conn.execute(f'GRANT INSERT, SELECT ON public.hello TO "{app_login}"')
        with connect(db, user=app_login) as conn:
            job = conn.execute("SELECT job_id FROM broker.broker_add_job('hello', "
                               "$$INSERT INTO public.hello VALUES ('from a job')$$, p_tenant_id => 'acme')").fetchone()[0]
        runner = start(db, user=runner_login)
        runner.wait_for(lambda r: _status(db, job) == 2, timeout=120, what="the job completed")  # a loaded CI machine
        with connect(db) as conn:
            assert conn.execute("SELECT msg FROM public.hello").fetchall() == [("from a job",)]
            assert conn.execute("SELECT tenant_id, run_as FROM broker.broker_jobs WHERE job_id = %s",
                                (job,)).fetchone() == ("acme", app_login)
        runner.proc.send_signal(signal.SIGTERM)
        assert runner.proc.wait(60) == 0, runner.log()


def _status(db: str, job: int) -> int:
    with connect(db) as conn:
        return conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone()[0]


def test_a_second_install_names_the_databases_that_share_the_roles_and_keeps_passwords(template_db):
    with managed_owner() as (first, owner), managed_owner() as (second, other):
        assert cli("install", "--dsn", owner_dsn(first, owner), "--with-roles", "--admin-user", owner).returncode == 0
        with connect("postgres") as admin:
            before = admin.execute("SELECT rolname, rolpassword FROM pg_authid WHERE rolname LIKE 'broker\\_%' "
                                   "ORDER BY 1").fetchall()
        result = cli("install", "--dsn", owner_dsn(second, other), "--with-roles", "--admin-user", other)
        assert result.returncode == 0, result.stderr
        shared = next(line for line in result.stdout.splitlines() if "cluster-wide" in line)
        assert first in shared and "passwords are not changed (--set-passwords changes them)" in result.stdout
        assert shared.index("cluster-wide") < result.stdout.index("installing")  # named before anything changes
        with connect("postgres") as admin:
            assert admin.execute("SELECT rolname, rolpassword FROM pg_authid WHERE rolname LIKE 'broker\\_%' "
                                 "ORDER BY 1").fetchall() == before
        changed = cli("install", "--dsn", owner_dsn(second, other), "--with-roles", "--admin-user", other,
                      "--set-passwords", env=SECRETS)
        assert changed.returncode == 0, changed.stderr
        # (other databases of the test cluster may use the roles too: the line names every one, sorted)
        warned = next(line for line in changed.stdout.splitlines() if "--set-passwords: runners" in line)
        assert first in warned.split("--set-passwords: runners and applications of ")[1].split(" that log in as ")[0]
        assert "LOGIN and new passwords for broker_admin, broker_enqueue, broker_runtime" in changed.stdout


def test_passwords_without_set_passwords_are_a_usage_error(template_db):
    with managed_owner() as (db, owner):
        result = cli("install", "--dsn", owner_dsn(db, owner), "--with-roles", "--admin-user", owner,
                     "--broker-runtime-password", "x")
        assert result.returncode == 2 and "--set-passwords" in result.stderr and "Traceback" not in result.stderr
        lone = cli("install", "--dsn", owner_dsn(db, owner), "--set-passwords")
        assert lone.returncode == 2 and "--set-passwords needs --with-roles" in lone.stderr
        assert schemas(db) == ["public"]


def test_a_retention_login_is_granted_broker_retention_and_a_wrong_one_changes_nothing(template_db):
    with managed_owner() as (db, owner):
        runner_login = f"ret_{owner[2:]}"
        with connect(db, user=owner) as conn:
            conn.execute(f'CREATE ROLE "{runner_login}" LOGIN')
        missing = cli("install", "--dsn", owner_dsn(db, owner), "--with-roles", "--admin-user", owner,
                      "--retention-login", f"nobody_{owner[2:]}")
        assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
        assert f"--retention-login: no role nobody_{owner[2:]}" in missing.stderr
        assert "broker" not in schemas(db)  # refused before anything changed
        enqueue = cli("install", "--dsn", owner_dsn(db, owner), "--with-roles", "--retention-login", "broker_enqueue")
        assert enqueue.returncode == 2 and "every enqueue login could purge" in enqueue.stderr
        alone = cli("install", "--dsn", owner_dsn(db, owner), "--retention-login", runner_login)
        assert alone.returncode == 2 and "--retention-login needs --with-roles" in alone.stderr
        granted = cli("install", "--dsn", owner_dsn(db, owner), "--with-roles", "--admin-user", owner,
                      "--retention-login", runner_login)
        assert granted.returncode == 0, granted.stderr
        assert f"broker_retention granted to {runner_login}" in granted.stdout
        with connect(db) as conn:
            assert conn.execute("SELECT pg_has_role(%s, 'broker_retention', 'MEMBER'), "
                                "has_function_privilege(%s, 'broker.broker_purge_jobs(interval, integer, smallint)', "
                                "'EXECUTE')", (runner_login, runner_login)).fetchone() == (True, True)
