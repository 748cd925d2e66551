"""Autonomous jobs run only for roles an administrator arranged, per role: a role without the arrangement is
refused at enqueue (42501, the fix in the hint); a job whose role lost it before it ran fails for good at run
time (42501) and nothing of it runs; a role allowed via login for which the runner has no login configured fails
the same way, and is never run through SET ROLE instead."""
from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from autonomous_setup import add_job, autonomous_roles, outcome
from conftest import connect


def wait_finished(db: str, jobs: list[int], runner) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(outcome(db, j)[0] in (2, 3) for j in jobs):
            return
        time.sleep(0.2)
    raise AssertionError(f"jobs not finished: {[outcome(db, j) for j in jobs]}\n{runner.log()[-3000:]}")


def test_a_role_without_the_arrangement_is_refused_at_enqueue_with_the_fix(db, tmp_path):
    with autonomous_roles(db, tmp_path) as a:
        other = f"other_{uuid.uuid4().hex[:8]}"
        with connect("postgres") as admin:
            admin.execute(f'CREATE ROLE "{other}" NOLOGIN IN ROLE broker_enqueue')
        try:
            with a.as_role(other) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                add_job(conn, "vacuum", "VACUUM ANALYZE orders")
            assert refused.value.diag.message_primary == f"broker_add_job: role {other} may not run autonomous jobs"
            assert f"GRANT {other} TO broker_runtime; SELECT broker.broker_allow_autonomous('{other}')" \
                in refused.value.diag.message_hint
            with a.as_role(a.maint) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                add_job(conn, "call", "CALL etl.load()")  # maint is allowed maintenance statements only
            assert "broker_allow_autonomous" in refused.value.diag.message_hint
        finally:
            with connect("postgres") as admin:
                admin.execute(f'DROP ROLE "{other}"')


def test_an_arrangement_withdrawn_or_a_login_not_configured_fails_the_job_and_runs_nothing(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a:
        unconfigured = f"etl2_{uuid.uuid4().hex[:8]}"
        with connect("postgres") as admin:
            admin.execute(f'CREATE ROLE "{unconfigured}" LOGIN IN ROLE broker_enqueue')
            admin.execute(f'GRANT "{unconfigured}" TO broker_runtime')  # SET ROLE would work: it must not be used
        try:
            with connect(db) as owner:
                owner.execute(f'GRANT USAGE, CREATE ON SCHEMA public TO "{unconfigured}"')
                owner.execute("SELECT broker.broker_allow_autonomous(%s, 'login')", (unconfigured,))
            with a.as_role(a.maint) as conn:
                conn.execute("CREATE TABLE orders (id integer PRIMARY KEY)")
                withdrawn = add_job(conn, "cic", "CREATE INDEX CONCURRENTLY orders_more ON orders (id)", max_attempts=3)
            with a.as_role(unconfigured) as conn:
                conn.execute("CREATE TABLE marks (who name)")
                conn.execute("CREATE PROCEDURE mark() LANGUAGE sql AS $$INSERT INTO marks SELECT session_user$$")
                no_login = add_job(conn, "call", "CALL mark()", max_attempts=3)
            with connect(db) as owner:
                assert owner.execute("SELECT broker.broker_disallow_autonomous(%s)", (a.maint,)).fetchone() == (True,)
            runner = start(extra=("--config", str(a.config)), user=a.runner)
            wait_finished(db, [withdrawn, no_login], runner)
            status, attempts, sqlstate, message = outcome(db, withdrawn)
            assert (status, attempts, sqlstate) == (3, 1, "42501")
            assert message == f"role {a.maint} may no longer run autonomous jobs (broker_allow_autonomous)"
            status, attempts, sqlstate, message = outcome(db, no_login)
            assert (status, attempts, sqlstate) == (3, 1, "42501") and f"has no login for role {unconfigured}" in message
            with connect(db) as conn:
                assert conn.execute("SELECT to_regclass('orders_more')").fetchone() == (None,)
                assert conn.execute("SELECT count(*) FROM marks").fetchone() == (0,)
        finally:
            with connect(db) as owner:
                owner.execute(f'DROP OWNED BY "{unconfigured}"')
            with connect("postgres") as admin:
                admin.execute(f'DROP ROLE "{unconfigured}"')
