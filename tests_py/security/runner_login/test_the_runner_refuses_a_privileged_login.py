"""The runner does not run as a login that is, or can become, a superuser or a BYPASSRLS role, or a member of
broker_admin (which reads every tenant through its policies broker_admin_all, without BYPASSRLS): it exits
with one line of error; with --allow-privileged-login it runs and warns at every start."""
from __future__ import annotations

import uuid

import pytest

from conftest import connect
from runner_process import Runner


@pytest.fixture
def role_names():
    names = []
    yield names
    with connect("postgres") as admin:
        for name in reversed(names):
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


def run_as(db, tmp_path, user: str, *extra: str) -> Runner:
    return Runner(db, log_dir=tmp_path, user=user, extra=extra, name=f"runner-{user}")


@pytest.mark.parametrize("attributes", ["SUPERUSER", "BYPASSRLS", "IN ROLE {privileged}", "IN ROLE broker_admin"])
def test_a_privileged_login_is_refused(db, tmp_path, role_names, attributes):
    suffix = uuid.uuid4().hex[:8]
    privileged, login = f"priv_{suffix}", f"login_{suffix}"
    role_names += [privileged, login]
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{privileged}" NOLOGIN SUPERUSER')
        admin.execute(f'CREATE ROLE "{login}" LOGIN {attributes.format(privileged=privileged)}')
        admin.execute(f'GRANT broker_runtime TO "{login}"')
    runner = run_as(db, tmp_path, login)
    try:
        assert runner.wait(60) == 1
        lines = [line for line in runner.log().splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and login in lines[0] and "broker_runtime" in lines[0]
    finally:
        runner.kill()
    with connect(db) as owner:
        assert owner.execute("SELECT count(*) FROM broker.broker_queueinstance").fetchone() == (0,), \
            "it never registered"


def test_the_override_runs_and_warns(db, tmp_path, role_names):
    login = f"login_{uuid.uuid4().hex[:8]}"
    role_names.append(login)
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" LOGIN SUPERUSER')
    runner = run_as(db, tmp_path, login, "--allow-privileged-login")
    try:
        runner.wait_for(lambda r: r.role(db) == "active", what="the runner to become active")
        assert "UNSAFE" in runner.log()
    finally:
        runner.kill()


def test_a_broker_runtime_login_runs(db, tmp_path, role_names):
    login = f"login_{uuid.uuid4().hex[:8]}"
    role_names.append(login)
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE broker_runtime')
    runner = run_as(db, tmp_path, login)
    try:
        runner.wait_for(lambda r: r.role(db) == "active", what="the runner to become active")
        assert "UNSAFE" not in runner.log()
    finally:
        runner.kill()
