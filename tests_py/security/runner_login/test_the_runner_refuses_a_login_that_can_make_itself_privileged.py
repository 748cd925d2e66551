"""A login that is neither a superuser nor BYPASSRLS, nor a member of one, can still become one or act as
the server's OS user: CREATEROLE (PostgreSQL 15 lets it grant itself membership in broker_admin, which is
BYPASSRLS and owns every broker object), or membership in pg_execute_server_program (COPY ... PROGRAM:
a shell as the server's OS user) or pg_write_server_files (it writes the server's configuration files).
Code that runs as the runner's login would then own the whole cluster: the runner refuses such a login
as it refuses a superuser one."""
from __future__ import annotations

import time
import uuid

import pytest

from conftest import connect
from runner_process import Runner


@pytest.fixture
def login_name():
    names = []
    yield names
    with connect("postgres") as admin:
        for name in names:
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.mark.parametrize("attributes", ["CREATEROLE", "IN ROLE pg_execute_server_program",
                                        "IN ROLE pg_write_server_files"])
def test_a_login_that_can_make_itself_privileged_is_refused(db, tmp_path, login_name, attributes):
    login = f"login_{uuid.uuid4().hex[:8]}"
    login_name.append(login)
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" LOGIN {attributes}')
        admin.execute(f'GRANT broker_runtime TO "{login}"')
    runner = Runner(db, log_dir=tmp_path, user=login, name=f"runner-{login}")
    try:
        deadline = time.monotonic() + 60
        while runner.proc.poll() is None and time.monotonic() < deadline:
            with connect(db) as owner:  # registered: it accepted the login
                if owner.execute("SELECT count(*) FROM broker.broker_queueinstance").fetchone() != (0,):
                    break
            time.sleep(0.1)
        assert runner.proc.poll() == 1, f"the runner accepted the login ({attributes})"
    finally:
        runner.kill()
