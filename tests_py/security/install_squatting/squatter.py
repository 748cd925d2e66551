"""Helpers for the install-squatting tests: a login that may create schemas in the database
before pgsql_broker is installed (it has CREATE on the database, nothing else), the real CLI,
and the checks every test ends with (did the squatter gain anything?)."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from conftest import connect, dsn

CLI = [sys.executable, "-m", "pgsql_broker"]
PASSWORDS = {"BROKER_ADMIN_PASSWORD": "adm-sq-1", "BROKER_RUNTIME_PASSWORD": "run-sq-2",
             "BROKER_ENQUEUE_PASSWORD": "enq-sq-3", "PG_PASS": "unused-with-trust"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """python -m pgsql_broker ARGS, with the broker roles' passwords in the environment (--with-roles)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=os.environ | PASSWORDS,
                          stdin=subprocess.DEVNULL, timeout=180)


def install(db: str, *flags: str) -> subprocess.CompletedProcess:
    return run_cli("install", "--dsn", dsn(db), *flags)


def assert_refused(result: subprocess.CompletedProcess, *words: str) -> None:
    """Exit code 1 and one error line on stderr that names what was refused."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]


def is_superuser(role: str) -> bool:
    with connect("postgres") as conn:
        return conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,)).fetchone()[0]


def owner_of_schema(db: str, schema: str) -> str | None:
    with connect(db) as conn:
        row = conn.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row[0] if row else None


@pytest.fixture
def mallory(empty_db):
    """A login with CREATE on empty_db (so it can create schemas there) and nothing else."""
    name = f"mallory_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN')
        admin.execute(f'GRANT CREATE ON DATABASE "{empty_db}" TO "{name}"')
    yield name
    with connect(empty_db) as conn:
        conn.execute(f'DROP OWNED BY "{name}" CASCADE')
    with connect("postgres") as admin:
        admin.execute(f'DROP ROLE "{name}"')


def as_login(db: str, role: str):
    """An autocommit connection to db as role (a real login, no SET ROLE)."""
    return connect(db, user=role)


def escalation(role: str) -> str:
    """plpgsql that makes role a superuser when a superuser runs it (the squatter's payload)."""
    return f"EXECUTE 'ALTER ROLE \"{role}\" SUPERUSER';"
