"""Install or upgrade pgsql_broker in one database, by CREATE EXTENSION or as tracked migrations.

Both paths run the same versioned scripts (see install/scripts.py). The migrations
path applies them with yoyo-migrations (its bookkeeping in schema broker_yoyo)
and records each version in broker.broker_schema_migrations.

Nothing another role made is used or adopted (another role may create schemas
before the first install): every session pins search_path to pg_catalog; schema
broker, its migrations record and schema broker_yoyo are read or used only when
the installer, a superuser or broker_admin owns them (yoyo's schema: only the
installer or a superuser, and only yoyo's own tables in it); the scripts and
roles.sql refuse objects in schema broker that pgsql_broker did not make.
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
from .role_setup import signal_backend_line
from .scripts import EXTENSION, control_version, migration_chain, roles_sql, version_key

YOYO_SCHEMA = "broker_yoyo"
# Serialises concurrent installers on one database (the class of the broker's locks; objid 1 is the
# installer's, beside those of sql/core/lock_keys.sql, which cannot be called before the schema exists).
_INSTALL_LOCK = (1651665664, 1)
# yoyo-migrations' own tables (yoyo/backends/base.py), the only objects allowed in YOYO_SCHEMA.
_YOYO_TABLES = ("_yoyo_log", "_yoyo_migration", "_yoyo_version", "yoyo_lock")
# Roles whose schemas and tables the installer may read or use: itself, a superuser, and
# broker_admin, which roles.sql makes the owner of what pgsql_broker made. (SQL, role r.)
_TRUSTED_OWNER = ("(r.rolsuper OR r.rolname OPERATOR(pg_catalog.=) CURRENT_USER "
                  "OR r.rolname OPERATOR(pg_catalog.=) 'broker_admin')")

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
    problem: str | None = None  # why schema broker must not be touched (see _foreign_broker_schema)

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


def pin_search_path(conn: psycopg.Connection) -> None:
    """Resolve nothing through "$user" or public, where other roles may have created look-alikes
    (psycopg sends 1 as smallint, so a planted f(integer, smallint) beats pg_catalog's f(integer, integer))."""
    conn.execute("SET search_path = pg_catalog, pg_temp")


def _foreign_broker_schema(conn: psycopg.Connection) -> str | None:
    """Why schema broker (or its migrations record) must be neither read nor used, else None.

    Reading a table runs code of its owner's choosing (a view, a policy), so this looks only
    at the catalog."""
    row = conn.execute(f"""
        SELECT n.nspowner::pg_catalog.regrole::text, e.extowner::pg_catalog.regrole::text,
               (SELECT {_TRUSTED_OWNER} FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) n.nspowner),
               (SELECT c.relkind::text FROM pg_catalog.pg_class AS c
                 WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
                   AND c.relname OPERATOR(pg_catalog.=) 'broker_schema_migrations'),
               (SELECT c.relowner::pg_catalog.regrole::text FROM pg_catalog.pg_class AS c
                 WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
                   AND c.relname OPERATOR(pg_catalog.=) 'broker_schema_migrations'),
               (SELECT {_TRUSTED_OWNER} FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_roles AS r
                    ON r.oid OPERATOR(pg_catalog.=) c.relowner
                 WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
                   AND c.relname OPERATOR(pg_catalog.=) 'broker_schema_migrations')
          FROM pg_catalog.pg_namespace AS n
          LEFT JOIN pg_catalog.pg_extension AS e
            ON e.extname OPERATOR(pg_catalog.=) %s AND e.extnamespace OPERATOR(pg_catalog.=) n.oid
         WHERE n.nspname OPERATOR(pg_catalog.=) 'broker'""", (EXTENSION,)).fetchone()
    if row is None:
        return None
    owner, extension_owner, owner_trusted, kind, table_owner, table_trusted = row
    if extension_owner is not None and owner in (extension_owner, "broker_admin"):
        return None
    if not owner_trusted:
        return (f"schema broker is owned by {owner}, not by the installer, a superuser or broker_admin: another "
                "role made it (before the install?); refusing to read or use it: find out who and why, and drop it")
    if kind is not None and (kind != "r" or not table_trusted):
        return (f"broker.broker_schema_migrations is {'a table' if kind == 'r' else 'not a table'} owned by "
                f"{table_owner}: pgsql-broker did not make it; refusing to read it")
    return None


def inspect(conn: psycopg.Connection) -> DatabaseState:
    target = control_version()
    row = conn.execute(
        """SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) %(ext)s),
                  pg_catalog.to_regnamespace('broker') IS NOT NULL,
                  EXISTS (SELECT 1 FROM pg_catalog.pg_available_extension_versions
                           WHERE name OPERATOR(pg_catalog.=) %(ext)s AND version OPERATOR(pg_catalog.=) %(target)s),
                  (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) CURRENT_USER)""",
        {"ext": EXTENSION, "target": target}).fetchone()
    problem = _foreign_broker_schema(conn)
    migrated = None
    if row[1] and not row[0] and problem is None:
        if conn.execute("SELECT pg_catalog.to_regclass('broker.broker_schema_migrations') IS NOT NULL").fetchone()[0]:
            versions = [r[0] for r in conn.execute(
                "SELECT version FROM broker.broker_schema_migrations "
                "WHERE install_path OPERATOR(pg_catalog.=) 'migrations'")]
            migrated = max(versions, key=version_key) if versions else None
    return DatabaseState(extension_version=row[0], migrated_version=migrated, schema_exists=row[1],
                         extension_available=row[2], superuser=row[3], problem=problem)


def install(dsn: str, *, no_extension: bool = False, log: Log = print, target: str | None = None,
            then: Callable[[], None] | None = None) -> DatabaseState:
    """Bring the database to the package's version (or to an older packaged version: target), then run
    `then` (the roles). Idempotent; refuses to mix paths or downgrade. When any of it fails on a database
    that had no broker, what this call made (schema broker or the extension, schema broker_yoyo) is dropped."""
    target = target or control_version()
    with psycopg.connect(dsn, autocommit=True) as conn:
        pin_search_path(conn)
        conn.execute("SELECT pg_catalog.pg_advisory_lock(%s, %s)", _INSTALL_LOCK)
        state = inspect(conn)
        had_yoyo = _has_schema(conn, YOYO_SCHEMA)
        try:
            _install(dsn, conn, state, no_extension, log, target)
            if then is not None:
                then()
        except BaseException:
            if not state.schema_exists and not state.problem:
                _undo_fresh_install(conn, drop_yoyo=not had_yoyo, log=log)
            raise
        return inspect(conn)


def _has_schema(conn: psycopg.Connection, name: str) -> bool:
    return conn.execute("SELECT pg_catalog.to_regnamespace(%s) IS NOT NULL", (name,)).fetchone()[0]


def _undo_fresh_install(conn: psycopg.Connection, drop_yoyo: bool, log: Log) -> None:
    """Drop what a failed first install made (only the installer's own schemas: nothing another role owns)."""
    try:
        if conn.execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) %s",
                        (EXTENSION,)).fetchone():
            conn.execute(sql.SQL("DROP EXTENSION {} CASCADE").format(sql.Identifier(EXTENSION)))
        for schema in ("broker", YOYO_SCHEMA) if drop_yoyo else ("broker",):
            owned = conn.execute(
                "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname OPERATOR(pg_catalog.=) %s "
                "AND nspowner OPERATOR(pg_catalog.=) pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))",
                (schema,)).fetchone()
            if owned:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        log("the install failed: what it had made is dropped, the database is as it was")
    except psycopg.Error as exc:  # the original error is the one to report
        log(f"the install failed and what it had made could not all be dropped: {exc}")


def _install(dsn: str, conn: psycopg.Connection, state: DatabaseState, no_extension: bool, log: Log,
             target: str) -> None:
    if state.problem:
        raise InstallError(state.problem)
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
        # (not trusted: its SECURITY DEFINER functions would belong to the bootstrap superuser; docs/install.md)
        why = ("--no-extension" if no_extension else
               "extension files not on the server" if not state.extension_available else
               "CREATE EXTENSION pgsql_broker needs a superuser")
        log(f"installing pgsql_broker {target} as tracked migrations ({why})")
        _apply_migrations(dsn, conn, state, log, target)


def _prepare_yoyo_schema(conn: psycopg.Connection) -> None:
    """Create schema broker_yoyo, or check that the one there is the installer's (_foreign_yoyo_objects)."""
    if conn.execute("SELECT pg_catalog.to_regnamespace(%s) IS NULL", (YOYO_SCHEMA,)).fetchone()[0]:
        # no IF NOT EXISTS: a schema another role makes meanwhile fails this, rather than being used
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(YOYO_SCHEMA)))
        conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
            sql.Identifier(YOYO_SCHEMA), sql.Literal("yoyo-migrations bookkeeping of pgsql-broker install")))
        return
    foreign = _foreign_yoyo_objects(conn)
    if foreign:
        raise InstallError(f"schema {YOYO_SCHEMA} exists and is not the installer's own ({'; '.join(foreign)}); "
                           "yoyo would run as this login whatever is planted there: refusing. Find out who made it "
                           f"and why, and drop it (DROP SCHEMA {YOYO_SCHEMA} CASCADE; the next install recreates it)")


def _foreign_yoyo_objects(conn: psycopg.Connection) -> list[str]:
    """What in schema broker_yoyo the installer must not use: an owner other than the installer or a
    superuser, privileges or default privileges for anyone else, anything but yoyo's own tables
    (and their indexes), triggers or rules on those. Empty when the schema is the installer's own."""
    found = [r[0] for r in conn.execute("""
        SELECT pg_catalog.format('schema owned by %%s', n.nspowner::pg_catalog.regrole)
          FROM pg_catalog.pg_namespace AS n JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
         WHERE n.nspname OPERATOR(pg_catalog.=) %(s)s AND NOT (r.rolsuper OR r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
        UNION ALL
        SELECT pg_catalog.format('%%s granted to %%s', a.privilege_type, a.grantee::pg_catalog.regrole)
          FROM pg_catalog.pg_namespace AS n, pg_catalog.aclexplode(n.nspacl) AS a
         WHERE n.nspname OPERATOR(pg_catalog.=) %(s)s AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
        UNION ALL
        SELECT 'default privileges' FROM pg_catalog.pg_default_acl AS d
         WHERE d.defaclnamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace(%(s)s)
        UNION ALL
        SELECT i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity
          FROM pg_catalog.pg_depend AS d, pg_catalog.pg_identify_object(d.classid, d.objid, 0) AS i
         WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace(%(s)s)
           AND NOT (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                    AND EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c
                                 WHERE c.oid OPERATOR(pg_catalog.=) d.objid AND c.relkind OPERATOR(pg_catalog.=) 'r'
                                   AND c.relname OPERATOR(pg_catalog.=) ANY (%(tables)s)))
        UNION ALL
        SELECT pg_catalog.format('table %%s: %%s', c.oid::pg_catalog.regclass, problem)
          FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) c.relowner,
               LATERAL (SELECT pg_catalog.format('owned by %%s', c.relowner::pg_catalog.regrole)
                         WHERE NOT (r.rolsuper OR r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                        UNION ALL SELECT 'has triggers' WHERE c.relhastriggers
                        UNION ALL SELECT 'has rules' WHERE c.relhasrules
                        UNION ALL SELECT 'has row security' WHERE c.relrowsecurity
                        UNION ALL SELECT pg_catalog.format('%%s granted to %%s', a.privilege_type, a.grantee::pg_catalog.regrole)
                          FROM pg_catalog.aclexplode(c.relacl) AS a WHERE a.grantee OPERATOR(pg_catalog.<>) c.relowner) AS p(problem)
         WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace(%(s)s)
        """, {"s": YOYO_SCHEMA, "tables": list(_YOYO_TABLES)})]
    return found


def _apply_migrations(dsn: str, conn: psycopg.Connection, state: DatabaseState, log: Log, target: str) -> None:
    _prepare_yoyo_schema(conn)
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
        lines = ["from yoyo import step", "from pgsql_broker.install.scripts import Script, migration_sql"]
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
    return json.loads((resources.files("pgsql_broker") / "catalog.json").read_text())


def verify(dsn: str) -> VerifyReport:
    """Read-only: version, pending migrations, and objects that differ from the package's catalog."""
    with psycopg.connect(dsn) as conn:
        conn.read_only = True
        pin_search_path(conn)
        state = inspect(conn)
        report = VerifyReport(state=state, target=control_version(), pending=pending_migrations(conn, state))
        if state.problem:
            report.differences = [state.problem]
        elif state.version == report.target:
            report.differences = catalog.differences(expected_catalog(), catalog.snapshot(conn))
        conn.rollback()
    return report


def apply_roles(admin_dsn: str, passwords: dict[str, str] | None = None, retention_logins: tuple[str, ...] = (),
                log: Log = print) -> None:
    """Create or update broker_admin, broker_runtime and broker_enqueue (roles.sql); with passwords, also
    give those roles LOGIN and these passwords (the others keep theirs); grant broker_retention to
    retention_logins (the CLI checked that they exist: role_setup.missing_roles).

    Passwords travel as SCRAM verifiers computed here, so the plain text never
    reaches the server (nor its statement log)."""
    passwords = passwords or {}
    notices: list[str] = []
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        pin_search_path(conn)
        _check_migrations_catalog(conn)
        # roles.sql's own notices (a broker_admin that still has BYPASSRLS), shown once it committed
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or "")
                                if (d.message_primary or "").startswith("roles.sql:") else None)
        with conn.transaction():
            conn.execute(roles_sql())
            for role, password in passwords.items():
                verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
                conn.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(verifier.decode())))
            for role in retention_logins:
                conn.execute(sql.SQL("GRANT broker_retention TO {}").format(sql.Identifier(role)))
        log("roles broker_admin, broker_runtime, broker_enqueue created or updated; grants applied"
            + (f"; LOGIN and new passwords for {', '.join(sorted(passwords))}" if passwords else
               "; passwords not changed")
            + (f"; broker_retention granted to {', '.join(retention_logins)}" if retention_logins else ""))
        for line in notices:
            log(line)
        log(signal_backend_line(conn))


def _check_migrations_catalog(conn: psycopg.Connection) -> None:
    """Before roles.sql hands a migrations install to broker_admin: schema broker holds exactly the
    package's catalog (catalog.json), nothing added. (roles.sql itself refuses what another role owns;
    an extension's objects are told apart by membership.)"""
    state = inspect(conn)
    if state.problem:
        raise InstallError(state.problem)
    if state.path != "migrations" or state.version != control_version():
        return
    unexpected = [line for line in catalog.differences(expected_catalog(), catalog.snapshot(conn))
                  if ": unexpected or changed: " in line]
    if unexpected:
        raise InstallError("schema broker holds objects the package does not define, refusing to hand them to "
                           f"broker_admin: {'; '.join(unexpected[:5])}" + (" ..." if len(unexpected) > 5 else ""))
