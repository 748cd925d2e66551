"""What the runner's database login may be. Jobs run as their run_as role, but whatever PostgreSQL runs
outside a job's executor (at COMMIT, or in the session afterwards) runs as the login: it must not be able to
bypass row-level security or act as a superuser (README, "Security model")."""
from __future__ import annotations

import logging

import psycopg

from . import queries

log = logging.getLogger("pgsql_broker")


class LoginRefused(Exception):
    """The login is or can become a superuser or a BYPASSRLS role: the runner does not run as it."""


async def check_login(conn: psycopg.AsyncConnection, database: str, allow_privileged: bool) -> None:
    """Raise LoginRefused when the login is or can become (by membership) a superuser or a BYPASSRLS role;
    with allow_privileged log an UNSAFE warning instead (at every start of the database's session)."""
    roles = (await (await conn.execute(queries.PRIVILEGED_LOGIN)).fetchone())[0]
    if not roles:
        return
    message = (f"the login {conn.info.user} of database {database} is or can become {roles}; run the runner "
               f"as a login that is only a member of broker_runtime")
    if not allow_privileged:
        raise LoginRefused(message + " (or pass --allow-privileged-login, unsafe)")
    log.warning("UNSAFE: " + message + "; running anyway (allow_privileged_login)", extra={"database": database})
