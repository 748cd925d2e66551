"""What the runner's database login may be. Jobs run as their run_as role, but whatever PostgreSQL runs
outside a job's executor (at COMMIT, or in the session afterwards) runs as the login: it must not be able to
bypass row-level security, act as a superuser or make itself one (README, "Security model")."""
from __future__ import annotations

import logging

import psycopg

from ..logins import privileged_roles

log = logging.getLogger("pgsql_broker")


class LoginRefused(Exception):
    """The login is or can become a role that could escape its grants (superuser, BYPASSRLS, CREATEROLE,
    REPLICATION, or a predefined role for server files, programs or every table): the runner does not run
    as it."""


async def check_login(conn: psycopg.AsyncConnection, database: str, allow_privileged: bool, warn: bool = True) -> None:
    """Raise LoginRefused when the login is or can become (by membership) such a role (logins.PRIVILEGED_LOGIN);
    with allow_privileged log an UNSAFE warning instead (when `warn`: at every start of the database's session,
    not at every visit of a database that takes turns)."""
    roles = await privileged_roles(conn)
    if not roles:
        return
    message = (f"the login {conn.info.user} of database {database} is or can become {roles}; run the runner "
               f"as a login that is only a member of broker_runtime")
    if not allow_privileged:
        raise LoginRefused(message + " (or pass --allow-privileged-login, unsafe)")
    if warn:
        log.warning("UNSAFE: " + message + "; running anyway (allow_privileged_login)", extra={"database": database})
