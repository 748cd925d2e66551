"""Which database errors can heal and which cannot, and each as one line.

libpq reports a refused login (authentication, a missing role or database, no CONNECT privilege) as
the text of the server's FATAL message, without a SQLSTATE: those are told apart by that text (the
server's messages in English, lc_messages C or en). Once connected, a missing privilege is SQLSTATE
42501. Everything else (refused or dropped connections, a server starting or shutting down, too many
connections, a host name that does not resolve yet, as in a container network) may heal: the runner
keeps retrying those with backoff. A refusal ends the runner after PERMANENT_TRIES in a row only while the
database never served it: that is a misconfiguration at start. Once it served, a refusal is what an operator
did for a while (a REVOKE, a pg_hba.conf reload, a database closed to connections) and may heal by itself: it
is waited out for refusal_retry_sec (0: for ever), logged at every try with what to do.
"""
from __future__ import annotations

import logging
import re
import time

import psycopg

log = logging.getLogger("pgsql_broker")

PERMANENT_TRIES = 3
_PERMANENT_SQLSTATES = {"28000", "28P01", "3D000", "42501"}
_PERMANENT_TEXT = re.compile(
    r'database "[^"]*" does not exist|role "[^"]*" does not exist|authentication failed for user'
    r'|no pg_hba\.conf entry|pg_hba\.conf rejects connection|is not permitted to log in'
    r'|permission denied for database|no password supplied|password is required'
    r'|is not currently accepting connections|SSL was required|invalid connection option'
    r'|invalid sslmode value|invalid integer value|invalid port number')
_PREFIX = re.compile(r"^connection failed: ")


class PermanentError(Exception):
    """A database refuses this runner for a reason no retry heals; the message is one line, with what to do."""


def is_permanent(exc: BaseException) -> bool:
    if not isinstance(exc, psycopg.Error):
        return False
    if exc.sqlstate in _PERMANENT_SQLSTATES:
        return True
    return exc.sqlstate is None and bool(_PERMANENT_TEXT.search(str(exc)))


def what_to_do(exc: BaseException) -> str:
    """The step that ends a refusal, for the log line."""
    text = str(exc)
    if getattr(exc, "sqlstate", None) == "42501" or "permission denied" in text:
        return "grant broker_runtime to the runner's login"
    if "pg_hba.conf" in text:
        return "allow the runner's login in pg_hba.conf and reload the server"
    if "not currently accepting connections" in text:
        return "ALTER DATABASE ... WITH ALLOW_CONNECTIONS true"
    if "does not exist" in text:
        return "create the database or the role, or correct the DSN"
    return "check the login's password and its LOGIN attribute"


def connect_message(exc: BaseException) -> str:
    """A database error as one line: the server's message, SQLSTATE and hint (not its context); a
    connection error with the address it tried and what to check."""
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        text = f"{exc.diag.message_primary} (SQLSTATE {exc.sqlstate})"
        if exc.diag.message_hint:
            text += f"; hint: {exc.diag.message_hint}"
    elif isinstance(exc, psycopg.OperationalError):
        text = _PREFIX.sub("", str(exc).strip()) + " (check host, port, dbname, user and password of --dsn / the config file)"
    else:
        text = str(exc)
    return " ".join(text.split())


class PermanentCounter:
    """Consecutive refusals of one database: at start-up the PERMANENT_TRIES-th in a row raises PermanentError;
    once the database served, refusals raise it only after `retry_sec` of them (0: never)."""

    def __init__(self, database: str, retry_sec: float = 0):
        self.database, self.count, self.retry_sec = database, 0, retry_sec
        self.since: float | None = None  # the first refusal of this run of them (time.monotonic())

    def check(self, exc: BaseException, role: str = "starting", served: bool = False) -> bool:
        """Whether exc is permanent (then logged here, one line); raises PermanentError at the last try.
        role: how far the session got before exc; one that served (active, standby or parked) was not refused,
        so the tries before it were no refusals in a row. served: the database served this runner before."""
        if role in ("active", "standby", "parked"):
            self.reset()
        if not is_permanent(exc):
            self.reset()
            return False
        self.count += 1
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        message = connect_message(exc)
        if served:
            waited = now - self.since
            if self.retry_sec and waited >= self.retry_sec:
                raise PermanentError(f"database {self.database}: {message}; gave up after {waited:.0f} s of "
                                     f"refusals (refusal_retry_sec)") from None
            log.warning("database refuses this runner, waiting it out: %s", what_to_do(exc), extra={
                "database": self.database, "error": message, "try": self.count,
                "refused_for_seconds": round(waited, 1)})
            return True
        if self.count >= PERMANENT_TRIES:
            raise PermanentError(f"database {self.database}: {message}; gave up after {self.count} "
                                 "tries (this does not heal by waiting)") from None
        log.warning("database refuses this runner, trying again", extra={
            "database": self.database, "error": message, "try": self.count, "of": PERMANENT_TRIES})
        return True

    def reset(self) -> None:
        self.count, self.since = 0, None
