"""Opening the runner's connections (with what notices a dead or stalled one), and reading one result out of a
message of several statements."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

from . import queries

log = logging.getLogger("pgsql_broker")

# A worker connection that received a longer notice is closed after its jobs (run/worker.py).
BIG_NOTICE_CHARS = 1_000_000


# libpq's connection parameters that the runner sets unless the DSN (or, for connect_timeout, PGCONNECT_TIMEOUT)
# says otherwise, from the broker settings of the same meaning
TCP_PARAMETERS = {"keepalives_idle": "tcp_keepalives_idle_sec", "keepalives_interval": "tcp_keepalives_interval_sec",
                  "keepalives_count": "tcp_keepalives_count", "tcp_user_timeout": "tcp_user_timeout_ms",
                  "connect_timeout": "connect_timeout_sec"}


def with_tcp_defaults(dsn: str, settings) -> str:
    """The DSN with keepalives, tcp_user_timeout and connect_timeout from the settings where it sets none: a peer
    that vanished (a server's host gone, a network that drops packets) is noticed within about
    keepalives_idle + keepalives_interval * keepalives_count seconds while the connection waits, and within
    tcp_user_timeout while it sends. libpq ignores the TCP ones on a Unix socket."""
    params = conninfo_to_dict(dsn)
    extra = {"keepalives": "1"} if "keepalives" not in params else {}
    for name, field in TCP_PARAMETERS.items():
        if name not in params and not (name == "connect_timeout" and os.environ.get("PGCONNECT_TIMEOUT")):
            extra[name] = str(getattr(settings, field))
    return make_conninfo(dsn, **extra) if extra else dsn


def _cut(conn: psycopg.AsyncConnection, what: str, seconds: float) -> None:
    """The server did not answer within the deadline: shut the socket down, so that whatever waits on it fails
    as a lost connection (and the runner reconnects) instead of waiting for a network that may never come
    back. A proxy or a middlebox that stalls keeps answering TCP keepalives, so only this notices it."""
    if conn.closed:
        return
    log.warning("no answer from the database within %.0f s (%s): closing the connection", seconds, what,
                extra={"backend_pid": conn.info.backend_pid})
    with contextlib.suppress(OSError, psycopg.Error):
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def deadline(conn: psycopg.AsyncConnection, seconds: float | None, what: str):
    """Within the block the connection must answer within `seconds` (None: no deadline), else it is cut."""
    if seconds is None:
        yield
        return
    handle = asyncio.get_running_loop().call_later(seconds, _cut, conn, what, seconds)
    try:
        yield
    finally:
        handle.cancel()


async def connect(dsn: str, application_name: str, worker: bool) -> psycopg.AsyncConnection:
    """An autocommit connection without server-side prepared statements (workers reset the session,
    DEALLOCATE ALL, after every transaction of jobs). A worker's connection watches its notices: a job's
    NOTICE or WARNING reaches it whole (the job sets client_min_messages as it likes), and libpq keeps its
    input buffer at the largest message it read, so a connection that read a large one is marked
    (`broker_big_notice`) and closed after its transaction: a job cannot keep the runner big."""
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, application_name=application_name)
    conn.prepare_threshold = None
    if worker:
        conn.broker_big_notice = False  # type: ignore[attr-defined]

        def on_notice(diag: psycopg.errors.Diagnostic, conn=conn) -> None:
            if len(diag.message_primary or "") + len(diag.message_detail or "") > BIG_NOTICE_CHARS:
                conn.broker_big_notice = True  # type: ignore[attr-defined]
        conn.add_notice_handler(on_notice)
    return conn


async def job_id_result(conn: psycopg.AsyncConnection, sql: str, params: dict, row_factory=tuple_row) -> list:
    """Send several statements as one message (bound client-side, one round trip) and return the rows of the
    result whose first column is job_id (the claim's, broker_run_batch's, the release's)."""
    cur = psycopg.AsyncClientCursor(conn, row_factory=row_factory)
    await cur.execute(sql, params)
    while not (cur.pgresult is not None and cur.pgresult.nfields and cur.pgresult.fname(0) == b"job_id"):
        if not cur.nextset():
            raise psycopg.ProgrammingError("no job_id result in: " + sql[:60])
    return await cur.fetchall()


async def rollback_failed(conn: psycopg.AsyncConnection) -> None:
    """End a transaction a failed message left open (its error ended it on the server but not the COMMIT)."""
    if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        await conn.execute(queries.ROLLBACK)
