"""Fixtures for tests against the real PostgreSQL that `make test` starts.

Each test gets a fresh database cloned from a template that already has the
extension, so tests never see each other's jobs.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg
import pytest

TEMPLATE = "pgsql_broker_pytest_template"
ROLES_SQL = (Path(__file__).resolve().parent.parent / "sql" / "roles.sql").read_text()


def _require_cluster() -> None:
    if not os.environ.get("PGHOST"):
        pytest.exit("PG* variables are not set: run the tests through `make test` "
                    "(or export PGHOST/PGPORT/PGUSER for a server with pgsql_broker installed)", returncode=2)


def connect(dbname: str, **kwargs) -> psycopg.Connection:
    """An autocommit connection to one of the test databases."""
    kwargs.setdefault("autocommit", True)
    return psycopg.connect(dbname=dbname, **kwargs)


@pytest.fixture(scope="session")
def template_db() -> str:
    _require_cluster()
    with connect("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
    with connect(TEMPLATE) as conn:
        conn.execute("CREATE EXTENSION pgsql_broker")
        conn.execute(ROLES_SQL)  # broker roles, ownership and grants, as an install would
    yield TEMPLATE
    with connect("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')


@pytest.fixture
def db(template_db: str) -> str:
    """Name of a fresh database with the extension installed; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        # database privileges are not copied from the template (roles.sql grants this per database)
        admin.execute(f'GRANT CREATE ON DATABASE "{name}" TO broker_admin')
    yield name
    with connect("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def add_job(conn: psycopg.Connection, name: str, sql: str, **params) -> int:
    """Enqueue through broker_add_job with named parameters (p_ prefix added)."""
    names = ", ".join(f"p_{k} => %({k})s" for k in params)
    query = "SELECT job_id FROM broker.broker_add_job(%(n)s, %(s)s" + (", " + names if names else "") + ")"
    return conn.execute(query, {"n": name, "s": sql, **params}).fetchone()[0]


def job_status(conn: psycopg.Connection, job_id: int) -> int:
    return conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s", (job_id,)).fetchone()[0]


@pytest.fixture
def empty_db():
    """A fresh database without pgsql_broker."""
    name = f"i_{uuid.uuid4().hex[:12]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with connect("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def dsn(db: str) -> str:
    return f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={os.environ['PGUSER']}"


@pytest.fixture
def start(tmp_path):
    """Start real pgbroker-runner processes (killed at the end of the test)."""
    from runner_process import Runner
    started: list = []

    def _start(*databases: str, extra: tuple[str, ...] = (), name: str = "runner", user: str | None = None,
               **options):
        runner = Runner(*databases, log_dir=tmp_path, extra=extra, name=name, user=user, **options)
        started.append(runner)
        return runner
    yield _start
    for runner in started:
        runner.kill()
