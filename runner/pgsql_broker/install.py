"""Install or upgrade pgsql_broker in one database, by CREATE EXTENSION or as tracked migrations.

Both paths run the same versioned scripts (see scripts.py). The migrations
path applies them with yoyo-migrations (its bookkeeping in schema broker_yoyo)
and records each version in broker.broker_schema_migrations.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from yoyo import get_backend, read_migrations

from . import catalog
from .scripts import EXTENSION, control_version, migration_chain, roles_sql, version_key

YOYO_SCHEMA = "broker_yoyo"
# Serialises concurrent installers on one database (same class as the broker's locks).
_INSTALL_LOCK = (1651665664, 1)

Log = Callable[[str], None]


class InstallError(Exception):
    """The database is in a state this install must not touch; the message says why and what to do."""


@dataclass
class DatabaseState:
    extension_version: str | None
    migrated_version: str | None
    schema_exists: bool
    extension_available: bool
    superuser: bool

    @property
    def path(self) -> str | None:
        if self.extension_version:
            return "extension"
        if self.migrated_version:
            return "migrations"
        return None

    @property
    def version(self) -> str | None:
        return self.extension_version or self.migrated_version


@dataclass
class VerifyReport:
    state: DatabaseState
    target: str
    pending: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state.version == self.target and not self.pending and not self.differences

    def lines(self) -> list[str]:
        state = self.state
        out = [f"installed version: {state.version or 'none'}"
               + (f" (via {state.path})" if state.path else ""),
               f"package version:   {self.target}"]
        out += [f"pending: {p}" for p in self.pending] or ["pending: none"]
        out += self.differences
        out.append("OK: up to date" if self.ok else "NOT up to date: run pgsql-broker install")
        return out


def inspect(conn: psycopg.Connection) -> DatabaseState:
    target = control_version()
    row = conn.execute(
        """SELECT (SELECT extversion FROM pg_extension WHERE extname = %(ext)s),
                  to_regnamespace('broker') IS NOT NULL,
                  EXISTS (SELECT 1 FROM pg_available_extension_versions WHERE name = %(ext)s AND version = %(target)s),
                  (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)""",
        {"ext": EXTENSION, "target": target}).fetchone()
    migrated = None
    if row[1] and not row[0]:
        if conn.execute("SELECT to_regclass('broker.broker_schema_migrations') IS NOT NULL").fetchone()[0]:
            versions = [r[0] for r in conn.execute(
                "SELECT version FROM broker.broker_schema_migrations WHERE install_path = 'migrations'")]
            migrated = max(versions, key=version_key) if versions else None
    return DatabaseState(extension_version=row[0], migrated_version=migrated, schema_exists=row[1],
                         extension_available=row[2], superuser=row[3])


def install(dsn: str, *, no_extension: bool = False, log: Log = print, target: str | None = None) -> DatabaseState:
    """Bring the database to the package's version (or to an older packaged version: target).
    Idempotent; refuses to mix paths or downgrade."""
    target = target or control_version()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", _INSTALL_LOCK)
        state = inspect(conn)
        if state.version and version_key(state.version) > version_key(target):
            raise InstallError(f"the database has pgsql_broker {state.version}, newer than this package ({target}); "
                               "refusing to downgrade: upgrade the pgsql-broker package instead")
        if state.path == "extension":
            if no_extension:
                raise InstallError("pgsql_broker is installed as an extension here; refusing to mix in migrations. "
                                   "Run without --no-extension (ALTER EXTENSION pgsql_broker UPDATE).")
            if state.version == target:
                log(f"pgsql_broker {target} is installed (extension); nothing to do")
            else:
                conn.execute(sql.SQL("ALTER EXTENSION pgsql_broker UPDATE TO {}").format(sql.Literal(target)))
                log(f"updated extension pgsql_broker {state.version} -> {target}")
        elif state.path == "migrations":
            _apply_migrations(dsn, conn, state, log, target)
        elif state.schema_exists:
            raise InstallError("schema broker exists but was not installed by pgsql-broker (no extension, no "
                               "recorded migrations); refusing to touch it")
        elif not no_extension and state.extension_available and state.superuser:
            conn.execute(sql.SQL("CREATE EXTENSION pgsql_broker VERSION {}").format(sql.Literal(target)))
            log(f"created extension pgsql_broker {target}")
        else:
            why = ("--no-extension" if no_extension else
                   "extension files not on the server" if not state.extension_available else
                   "CREATE EXTENSION pgsql_broker needs a superuser")
            log(f"installing pgsql_broker {target} as tracked migrations ({why})")
            _apply_migrations(dsn, conn, state, log, target)
        return inspect(conn)


def _apply_migrations(dsn: str, conn: psycopg.Connection, state: DatabaseState, log: Log, target: str) -> None:
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(YOYO_SCHEMA)))
    conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
        sql.Identifier(YOYO_SCHEMA), sql.Literal("yoyo-migrations bookkeeping of pgsql-broker install")))
    backend = get_backend(_yoyo_uri(dsn))
    with tempfile.TemporaryDirectory(prefix="pgsql_broker_migrations_") as tmp:
        _write_migrations(Path(tmp), target)
        migrations = read_migrations(tmp)
        with backend.lock():
            pending = backend.to_apply(migrations)
            if not pending:
                log(f"pgsql_broker {state.version} is installed (migrations); nothing to do")
                return
            for migration in pending:
                log(f"applying migration {migration.id}")
            backend.apply_migrations(pending)
    log(f"pgsql_broker {target} installed as migrations")


def _write_migrations(directory: Path, target: str) -> None:
    """One yoyo migration module per script of the chain, each depending on the previous one."""
    previous = None
    for script in migration_chain(target):
        lines = ["from yoyo import step", "from pgsql_broker.scripts import Script, migration_sql"]
        if previous:
            lines.append(f"__depends__ = {{{previous!r}}}")
        lines.append(f"steps = [step(migration_sql(Script({script.name!r}, {script.to_version!r}, "
                     f"{script.from_version!r})))]")
        (directory / f"{script.migration_id}.py").write_text("\n".join(lines) + "\n")
        previous = script.migration_id


def _yoyo_uri(dsn: str) -> str:
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if v is not None}
    dbname = params.pop("dbname", "")
    params["schema"] = YOYO_SCHEMA
    return f"postgresql+psycopg:///{dbname}?{urlencode(params)}"


def pending_migrations(conn: psycopg.Connection, state: DatabaseState) -> list[str]:
    target = control_version()
    if state.path == "extension":
        return [] if state.version == target else [f"ALTER EXTENSION pgsql_broker UPDATE TO '{target}'"]
    done = state.version
    return [s.migration_id for s in migration_chain()
            if done is None or version_key(s.to_version) > version_key(done)]


def expected_catalog() -> dict[str, list[str]]:
    return json.loads((resources.files(__package__) / "catalog.json").read_text())


def verify(dsn: str) -> VerifyReport:
    """Read-only: version, pending migrations, and objects that differ from the package's catalog."""
    with psycopg.connect(dsn) as conn:
        conn.read_only = True
        state = inspect(conn)
        report = VerifyReport(state=state, target=control_version(), pending=pending_migrations(conn, state))
        if state.version == report.target:
            report.differences = catalog.differences(expected_catalog(), catalog.snapshot(conn))
        conn.rollback()
    return report


def apply_roles(admin_dsn: str, passwords: dict[str, str], log: Log = print) -> None:
    """Create or update broker_admin, broker_runtime and broker_enqueue (roles.sql) and set their passwords.

    Passwords travel as SCRAM verifiers computed here, so the plain text never
    reaches the server (nor its statement log)."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(roles_sql())
            for role, password in passwords.items():
                verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
                conn.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(verifier.decode())))
        log(f"roles {', '.join(sorted(passwords))} created or updated; grants applied")
