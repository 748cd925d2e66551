"""Which database errors can heal and which cannot, and each as one line.

libpq reports a refused login (authentication, a missing role or database, no CONNECT privilege) as
the text of the server's FATAL message, without a SQLSTATE: those are told apart by that text (the
server's messages in English, lc_messages C or en). Once connected, a missing privilege is SQLSTATE
42501. Everything else (refused or dropped connections, a server starting or shutting down, too many
connections, a host name that does not resolve yet, as in a container network) may heal: the runner
keeps retrying those with backoff, and stops on a permanent one after PERMANENT_TRIES in a row.
"""
from __future__ import annotations

import logging
import re

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
    """Consecutive permanent errors of one database: the PERMANENT_TRIES-th in a row raises PermanentError."""

    def __init__(self, database: str):
        self.database, self.count = database, 0

    def check(self, exc: BaseException, role: str = "starting") -> bool:
        """Whether exc is permanent (then logged here, one line); raises PermanentError at the last try.
        role: how far the session got before exc; one that served (active, standby or parked) was not refused,
        so the tries before it were no refusals in a row."""
        if role in ("active", "standby", "parked"):
            self.count = 0
        if not is_permanent(exc):
            self.count = 0
            return False
        self.count += 1
        message = connect_message(exc)
        if self.count >= PERMANENT_TRIES:
            raise PermanentError(f"database {self.database}: {message}; gave up after {self.count} "
                                 "tries (this does not heal by waiting)") from None
        log.warning("database refuses this runner, trying again", extra={
            "database": self.database, "error": message, "try": self.count, "of": PERMANENT_TRIES})
        return True

    def reset(self) -> None:
        self.count = 0
