"""The runner's session connection and poolers (docs/poolers.md).

The session connection LISTENs and holds the instance lock, both session state of its server backend. A
pooler in session mode (PgBouncer pool_mode = session) gives a client one server connection for the
client's whole life, so it works like a direct connection; in transaction (or statement) pooling the server
connection goes back to the pool after every transaction, where its LISTEN and its lock outlive the runner
and serve other clients. The runner finds out before it takes the lock: a second connection to the same
DSN runs a statement while the session is idle. Behind transaction pooling it is handed the idle server
connection the session just used (PgBouncer reuses the most recent one first), or the session's next
statement runs on another; neither can happen to a session of its own (direct, or session pooling).
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

import psycopg

from . import queries
from .login import LoginRefused

PROBE_SEC = 5.0


class TransactionPoolingRefused(LoginRefused):
    """The session connection goes through transaction pooling: the process exits with this message."""


async def _pid(conn: psycopg.AsyncConnection) -> int:
    return (await (await conn.execute(queries.BACKEND_PID)).fetchone())[0]


async def refuse_transaction_pooling(conn: psycopg.AsyncConnection,
                                     connect: Callable[[], Awaitable[psycopg.AsyncConnection]], database: str) -> None:
    """Raise TransactionPoolingRefused when `conn` does not keep one server backend across transactions."""
    mine = await _pid(conn)
    try:
        other = await asyncio.wait_for(connect(), PROBE_SEC)
    except (psycopg.OperationalError, asyncio.TimeoutError):
        return  # no second connection now (say the server is full): nothing to compare, as a direct session
    try:
        theirs = await asyncio.wait_for(_pid(other), PROBE_SEC)
    except (psycopg.OperationalError, asyncio.TimeoutError):
        return  # a full session pool makes the probe wait for a server connection: session pooling
    finally:
        await other.close()
    if theirs == mine or await _pid(conn) != mine:
        raise TransactionPoolingRefused(
            f"database {database}: the connection goes through a pooler in transaction or statement pooling "
            f"(its server connection changes between transactions), where the runner's LISTEN and instance lock "
            f"cannot live: connect the runner to PostgreSQL directly, or to a PgBouncer database entry with "
            f"pool_mode = session (docs/poolers.md)")
