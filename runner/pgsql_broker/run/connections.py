"""Opening the runner's connections, and reading one result out of a message of several statements."""
from __future__ import annotations

import psycopg
from psycopg.rows import tuple_row

from . import queries

# A worker connection that received a longer notice is closed after its jobs (run/worker.py).
BIG_NOTICE_CHARS = 1_000_000


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
