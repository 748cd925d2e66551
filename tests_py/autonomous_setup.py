"""Roles, arrangements and a runner configuration for the autonomous-job tests: a maintenance role `maint`
(allowed via set_role: GRANT maint TO broker_runtime), a role `etl` that logs in (allowed via login, its login in
the runner's autonomous_logins), and a runner login that is only a member of broker_runtime."""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from conftest import connect


@dataclass
class Autonomous:
    db: str
    maint: str
    etl: str
    runner: str
    config: Path

    def as_role(self, role: str):
        """An autocommit connection of the test superuser acting as `role` (SET ROLE)."""
        conn = connect(self.db)
        conn.execute(f'SET ROLE "{role}"')
        return conn


@contextmanager
def autonomous_roles(db: str, tmp_path: Path, lease_seconds: int = 30) -> Iterator[Autonomous]:
    """lease_seconds: long enough that a claim of a slow machine does not expire before its job starts (a test of
    recovery passes a short one)."""
    suffix = uuid.uuid4().hex[:8]
    maint, etl, runner = f"maint_{suffix}", f"etl_{suffix}", f"rt_{suffix}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{maint}" NOLOGIN IN ROLE broker_enqueue')
        admin.execute(f'CREATE ROLE "{etl}" LOGIN IN ROLE broker_enqueue')
        admin.execute(f'CREATE ROLE "{runner}" LOGIN IN ROLE broker_runtime')
        admin.execute(f'GRANT "{maint}" TO broker_runtime')
    passfile = tmp_path / "etl.pgpass"
    passfile.write_text(f"*:*:*:{etl}:not-needed-with-trust\n")
    passfile.chmod(0o600)
    config = tmp_path / "broker.yaml"
    config.write_text(yaml.safe_dump({
        "databases": [{"name": db, "database": db, "user": runner, "host": os.environ["PGHOST"],
                       "port": int(os.environ["PGPORT"]), "queue_count": 1,
                       "autonomous_logins": {etl: {"passfile": str(passfile)}}}],
        "broker": {"lease_seconds": lease_seconds, "stale_job_recovery_sec": 0.5, "queue_timer_sec": 0.2,
                   "shutdown_timeout_sec": 1}}))
    try:
        with connect(db) as owner:
            for role in (maint, etl):
                owner.execute(f'GRANT USAGE, CREATE ON SCHEMA public TO "{role}"')
            owner.execute("SELECT broker.broker_allow_autonomous(%s)", (maint,))
            owner.execute("SELECT broker.broker_allow_autonomous(%s, 'login')", (etl,))
            owner.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        yield Autonomous(db, maint, etl, runner, config)
    finally:
        with connect(db) as owner:
            for role in (maint, etl, runner):
                owner.execute(f'DROP OWNED BY "{role}"')
        with connect("postgres") as admin:
            for role in (maint, etl, runner):
                admin.execute(f'DROP ROLE "{role}"')


def add_job(conn, name: str, sql: str, **params) -> int:
    """broker_add_job with p_autonomous => true and named parameters (p_ prefix added)."""
    names = "".join(f", p_{k} => %({k})s" for k in params)
    return conn.execute("SELECT job_id FROM broker.broker_add_job(%(n)s, %(s)s, p_autonomous => true" + names + ")",
                        {"n": name, "s": sql, **params}).fetchone()[0]


def outcome(db: str, job_id: int) -> tuple:
    with connect(db) as conn:
        return conn.execute("SELECT complete_status, attempts, last_error_sqlstate, last_error_message "
                            "FROM broker.broker_jobs WHERE job_id = %s", (job_id,)).fetchone()
