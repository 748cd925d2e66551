"""A managed-PostgreSQL-like login: it owns its database and has CREATEROLE, but is no superuser and has no
BYPASSRLS (what a provider gives), and the real CLI run as it."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from contextlib import contextmanager
from typing import Iterator

from conftest import connect

CLI = [sys.executable, "-m", "pgsql_broker"]
BROKER_ROLES = ("broker_admin", "broker_runtime", "broker_enqueue", "broker_retention", "broker_worker")


@contextmanager
def managed_owner(createrole: bool = True) -> Iterator[tuple[str, str]]:
    """(database, owner login): CREATE ROLE o LOGIN CREATEROLE; CREATE DATABASE d OWNER o. Dropped after,
    with the roles the owner made (named o_*).

    The broker roles exist already (the template's superuser made them). On PostgreSQL 16 and later a CREATEROLE
    role administers only roles it created or holds ADMIN OPTION on, so there the owner also gets ADMIN OPTION on
    them, as the owner of a second database of a server must (docs/install.md, "PostgreSQL versions")."""
    suffix = uuid.uuid4().hex[:8]
    owner, database = f"o_{suffix}", f"d_{suffix}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{owner}" LOGIN {"CREATEROLE" if createrole else ""}')
        admin.execute(f'CREATE DATABASE "{database}" OWNER "{owner}"')
        if createrole and admin.info.server_version >= 160000:
            # From 16 CREATEROLE administers only the roles it made; the shared cluster's broker roles are the
            # superuser's (the template): the owner gets what making them would have given it
            for role in ("broker_admin", "broker_runtime", "broker_enqueue", "broker_retention", "broker_worker"):
                admin.execute(f'GRANT {role} TO "{owner}" WITH ADMIN TRUE, INHERIT FALSE, SET FALSE')
    try:
        yield database, owner
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            # (the owner last: from 16 it is the grantor of the memberships it gave its logins)
            for (role,) in admin.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY rolname = %s",
                                         (f"%_{suffix}", owner)).fetchall():
                admin.execute(f'DROP ROLE "{role}"')


def owner_dsn(database: str, owner: str) -> str:
    return f"dbname={database} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={owner}"


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI with no PG* user or password of the test superuser to fall back on."""
    base = {k: v for k, v in os.environ.items() if k not in ("PGUSER", "PGPASSWORD")}
    base["PG_PASS"] = "unused-with-trust"  # the admin password --with-roles asks for (the test cluster trusts)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=base | (env or {}),
                          stdin=subprocess.DEVNULL, timeout=180)


def schemas(database: str) -> list[str]:
    with connect(database) as conn:
        return [r[0] for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' "
            "ORDER BY 1")]


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]
