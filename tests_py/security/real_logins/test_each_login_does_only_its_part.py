"""The three roles as real logins: what an enqueuing client and the runner can and cannot do."""
from __future__ import annotations

import uuid

import psycopg
import pytest

from conftest import connect


@pytest.fixture
def logins(db):
    """Two enqueue logins and one runtime login, dropped (with their executors) afterwards."""
    suffix = uuid.uuid4().hex[:8]
    names = {"alice": f"alice_{suffix}", "bob": f"bob_{suffix}", "runner": f"runner_{suffix}"}
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{names["alice"]}" LOGIN IN ROLE broker_enqueue')
        admin.execute(f'CREATE ROLE "{names["bob"]}" LOGIN IN ROLE broker_enqueue')
        admin.execute(f'CREATE ROLE "{names["runner"]}" LOGIN IN ROLE broker_runtime')
    with connect(db) as owner:
        owner.execute("CREATE TABLE results (who text, tenant text)")
        owner.execute(f'GRANT INSERT ON results TO "{names["alice"]}", "{names["bob"]}"')
        owner.execute(f'GRANT USAGE ON SCHEMA public TO "{names["alice"]}", "{names["bob"]}"')
    yield names
    with connect(db) as owner:
        for name in names.values():
            owner.execute(f'DROP OWNED BY "{name}"')
    with connect("postgres") as admin:
        for name in names.values():
            admin.execute(f'DROP ROLE "{name}"')


def test_clients_enqueue_in_their_tenant_and_the_runner_runs_every_tenant_as_the_enqueuer(db, logins):
    alice = connect(db, user=logins["alice"], autocommit=False)
    alice.execute("SELECT broker.broker_set_tenant('acme')")
    alice.execute("SELECT broker.broker_add_job('a', 'INSERT INTO public.results "
                  "SELECT current_user, current_setting(''broker.tenant_id'')')")
    alice.commit()
    # the tenant was transaction-local: the pooled connection is back in 'default'
    assert alice.execute("SELECT broker.broker_current_tenant()").fetchone() == ("default",)
    alice.commit()

    bob = connect(db, user=logins["bob"])
    bob.execute("SELECT broker.broker_add_job('b', 'INSERT INTO public.results "
                "SELECT current_user, current_setting(''broker.tenant_id'')')")
    assert bob.execute("SELECT count(*) FROM broker.broker_jobs").fetchone() == (1,)  # only its own (default)

    runner = connect(db, user=logins["runner"])
    ran = runner.execute("SELECT r.complete_status FROM broker.broker_get(1, NULL, 60, 10) g, "
                         "LATERAL broker.broker_run(g.job_id, g.lease_token) r").fetchall()
    assert ran == [(2,), (2,)]
    with connect(db) as owner:
        rows = sorted(owner.execute("SELECT who, tenant FROM results").fetchall())
    assert rows == sorted([(logins["alice"], "acme"), (logins["bob"], "default")])


def test_an_enqueue_login_cannot_claim_run_or_rewrite_jobs(db, logins):
    alice = connect(db, user=logins["alice"])
    job = alice.execute("SELECT job_id FROM broker.broker_add_job('x', 'SELECT 1')").fetchone()[0]
    for sql in ("SELECT * FROM broker.broker_get(1)", f"SELECT * FROM broker.broker_run({job})",
                f"UPDATE broker.broker_jobs SET execute_str = 'SELECT 2' WHERE job_id = {job}",
                f"UPDATE broker.broker_jobs SET run_as = 'postgres' WHERE job_id = {job}",
                "SELECT * FROM broker.broker_recover_stale_jobs()",
                f"DELETE FROM broker.broker_jobs WHERE job_id = {job}"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            alice.execute(sql)


def test_the_runtime_login_cannot_enqueue_or_write_tables(db, logins):
    runner = connect(db, user=logins["runner"])
    for sql in ("SELECT broker.broker_add_job('x', 'SELECT 1')",
                "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('x', 'x', 'SELECT 1')",
                "UPDATE broker.broker_jobs SET complete_status = 2"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runner.execute(sql)


def test_a_job_cannot_use_the_runner_session_to_escape(db, logins):
    alice = connect(db, user=logins["alice"])
    alice.execute("SELECT broker.broker_add_job('escape', $$RESET ROLE; SELECT broker.broker_get(1)$$)")
    alice.execute("SELECT broker.broker_add_job('auth', $$SET SESSION AUTHORIZATION DEFAULT; SELECT broker.broker_get(1)$$)")
    runner = connect(db, user=logins["runner"])
    rows = runner.execute("SELECT g.job_name, r.error_sqlstate FROM broker.broker_get(1, NULL, 60, 10) g, "
                          "LATERAL broker.broker_run(g.job_id, g.lease_token) r ORDER BY 1").fetchall()
    assert rows == [("auth", "42501"), ("escape", "42501")]
    assert runner.execute("SELECT current_user").fetchone() == (logins["runner"],)
