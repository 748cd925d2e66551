"""What `pgsql-broker install --with-roles` checks and says before it changes anything.

The broker roles are cluster-wide: every database of the server that uses them shares their
attributes and passwords. The attribute rule (what a CREATEROLE login may give and change) is roles.sql's
own first block, run here alone so that a login lacking a right is refused before the install."""
from __future__ import annotations

import re

import psycopg

from .scripts import roles_sql

ROLES = ("broker_admin", "broker_runtime", "broker_enqueue")
_CHECK_BLOCK = re.compile(r"^DO \$check_roles\$.*?^\$check_roles\$;$", re.S | re.M)


def check_roles(conn: psycopg.Connection) -> None:
    """Raise (42501, roles.sql's message and hint) when this login cannot give the roles what they need."""
    match = _CHECK_BLOCK.search(roles_sql())
    if match is None:
        raise RuntimeError("roles.sql has no $check_roles$ block")
    conn.execute(match.group(0))


def missing_roles(conn: psycopg.Connection, names: tuple[str, ...]) -> list[str]:
    """The names (of --retention-login) that are no role of this server (the broker's own roles are made by
    the same --with-roles)."""
    return [name for name in names if name not in ROLES and conn.execute(
        "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) %s", (name,)).fetchone() is None]


def databases_using_roles(conn: psycopg.Connection) -> list[str]:
    """Databases (other than this one) where an object is owned by a broker role or grants it a privilege
    (pg_shdepend records both, for every database of the cluster)."""
    return [row[0] for row in conn.execute(
        """SELECT DISTINCT d.datname FROM pg_catalog.pg_shdepend AS s
             JOIN pg_catalog.pg_database AS d ON d.oid OPERATOR(pg_catalog.=) s.dbid
             JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) s.refobjid
            WHERE s.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
              AND r.rolname OPERATOR(pg_catalog.=) ANY (%s)
              AND d.datname OPERATOR(pg_catalog.<>) pg_catalog.current_database()
            ORDER BY 1""", (list(ROLES),))]


def existing_roles(conn: psycopg.Connection) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) ANY (%s) ORDER BY 1",
        (list(ROLES),))]


def sharing_notice(conn: psycopg.Connection, set_passwords: bool) -> list[str]:
    """Lines naming the databases that share the roles, and what --set-passwords does to their runners."""
    others = databases_using_roles(conn)
    if not others:
        return [f"roles {', '.join(ROLES)} are cluster-wide; no other database of this server uses them"]
    lines = [f"roles {', '.join(ROLES)} are cluster-wide, shared with database(s) {', '.join(others)}: "
             "their attributes, LOGIN and passwords are the same there (grants are per database)"]
    if set_passwords:
        lines.append(f"--set-passwords: runners and applications of {', '.join(others)} that log in as these roles "
                     "need the new passwords")
    else:
        lines.append("passwords are not changed (--set-passwords changes them)")
    return lines


_MAY_GRANT_SIGNAL = """SELECT r.rolsuper OR pg_catalog.pg_has_role(CURRENT_USER, 'pg_signal_backend', 'MEMBER WITH ADMIN OPTION')
                             OR (r.rolcreaterole AND pg_catalog.current_setting('server_version_num')::int OPERATOR(pg_catalog.<) 160000)
                        FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER"""


def signal_backend_line(conn: psycopg.Connection) -> str:
    """One line on pg_signal_backend, granted to nobody by the install: the runner's stop ends only sessions of
    its own login, which needs no privilege; a standby ends an instance lock that another login holds only as a
    member of it (docs/poolers.md), which would also let that login signal every other non-superuser session
    of the cluster. Whether this login could grant it (PostgreSQL 16: ADMIN OPTION on it)."""
    may = conn.execute(_MAY_GRANT_SIGNAL).fetchone()[0]
    return ("pg_signal_backend: not granted (the runner's stop needs none: it ends only its own login's sessions); "
            "a standby ends an instance lock held by another login only as its member: GRANT pg_signal_backend TO "
            "<runner login> " + ("(this login may)" if may else
                                 "(needs a superuser or a role with ADMIN OPTION on pg_signal_backend)"))
