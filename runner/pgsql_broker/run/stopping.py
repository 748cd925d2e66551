"""Stopping a database's runner without failing a job (SIGTERM/SIGINT, Broker.stop(), a lost listen connection).

Claiming stops at once, and every job claimed but not started goes back to pending at once, its attempt not
counted (broker_release_jobs, keyed by lease token). Running jobs may finish until shutdown_timeout_sec (a second
signal: not at all). Then the runner ends them itself: it terminates the session that executes them
(pg_terminate_backend, waiting for the backend to exit), so that their transaction rolls back whole, and
records the interruption in a new transaction on a connection that works (broker_interrupt_jobs): pending
again, attempt not counted, dependents untouched, broker_jobs.interruptions counted. A cancel would not do:
the executor catches query_canceled (it records a failed attempt) and so can a job's own code. A run that
committed in the very moment of the deadline keeps its outcome (a finished job has no lease to interrupt).
What the runner could not hand back because the database was gone or refused it is kept (runner._orphans) and
handed back by the next session that works, unless the process itself is stopping; what a runner that is gone
had claimed is left to lease recovery, where the lost attempt counts (a lost session may be the job's own
doing), except for claims made before the server last started, which recovery returns without counting.
"""
from __future__ import annotations

import asyncio
import logging

import psycopg

from ..observe.logs import cap_text
from . import queries
from .connections import job_id_result, rollback_failed
from .queries import Claimed

log = logging.getLogger("pgsql_broker")
TERMINATE_WAIT_MS = 5000  # pg_terminate_backend waits this long for the backend to exit
INTERRUPT_LOCK_TIMEOUT = "10s"  # broker_interrupt_jobs waits for the row locks of a session still ending
EXIT_GRACE_SEC = 10.0  # then the workers whose session was ended must have returned


def arrays(rows: list[Claimed]) -> dict:
    """The jobs and lease tokens of claimed rows as the parameters of broker_run_batch, broker_release_jobs and
    broker_interrupt_jobs (array literals built here: psycopg's array dumper quotes element by element)."""
    return {"jobs": "{" + ",".join([str(r.job_id) for r in rows]) + "}",
            "tokens": "{" + ",".join([r.lease_token for r in rows]) + "}"}


def log_released(database: str, queue: int, rows: list[Claimed], released: set[int], why: str) -> None:
    """One line per job handed back (or not: its claim had already ended, say it ran elsewhere)."""
    for row in rows:
        fields = {"database": database, "queue": queue, "job_id": row.job_id, "job_name": row.job_name}
        if row.job_id in released:
            log.info("job released (%s): claimed, not started, back to pending, attempt not counted", why,
                     extra=fields)
        else:
            log.warning("job not released: its claim had ended", extra=fields)


async def _job_ids(conn: psycopg.AsyncConnection, sql: str, params: dict) -> set[int]:
    return {r[0] for r in await job_id_result(conn, sql, params)}


async def release(conn: psycopg.AsyncConnection, rows: list[Claimed], prefix: str = "", alone: bool = False) -> set[int]:
    """broker_release_jobs for claimed rows (`prefix`: statements sent first in the same message; `alone`: they
    run in a transaction of their own from now on)."""
    sql = queries.RELEASE_ALONE if alone else queries.RELEASE
    return await _job_ids(conn, prefix + sql, arrays(rows)) if rows else set()


async def release_claim(conn: psycopg.AsyncConnection, token: str) -> set[int]:
    """broker_release_claim: a claim whose answer was lost, whole (its jobs never started)."""
    released: set[int] = set()
    while got := await _job_ids(conn, queries.RELEASE_CLAIM, {"token": token}):
        released |= got
    return released


class _Control:
    """The connection the stop works on: the listen connection while it works, else a new one."""

    def __init__(self, runner, conn: psycopg.AsyncConnection | None):
        self.runner, self.conn, self.own = runner, conn, False

    async def get(self) -> psycopg.AsyncConnection:
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn, self.own = await self.runner._connect("stop"), True
        return self.conn

    async def close(self) -> None:
        if self.own and self.conn is not None:
            await self.conn.close()


async def _wait(tasks, timeout: float, hurry: asyncio.Event | None) -> set:
    """Wait until every task is done, the timeout passes or `hurry` is set; return the tasks not done."""
    pending = {t for t in tasks if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    waiter = asyncio.ensure_future(hurry.wait()) if hurry is not None else None
    try:
        while pending and not (hurry is not None and hurry.is_set()):
            left = deadline - loop.time()
            if left <= 0:
                break
            _, pending = await asyncio.wait(pending | ({waiter} if waiter else set()), timeout=left,
                                            return_when=asyncio.FIRST_COMPLETED)
            pending.discard(waiter)
    finally:
        if waiter is not None:
            waiter.cancel()
    return pending


async def _hand_back(runner, control: _Control, interrupted: frozenset[int] = frozenset()) -> None:
    """Release what every worker holds claimed and has not started (its buffer is taken: it runs none of it);
    `interrupted`: jobs already back to pending (a worker may have put them back in its buffer meanwhile)."""
    for (queue, _), buffer in runner._buffers.items():
        rows = [row for row in buffer if row.job_id not in interrupted]
        buffer.clear()
        if not rows:
            continue
        try:
            released = await release(await control.get(), rows)
        except (psycopg.Error, OSError) as exc:
            error = cap_text(str(exc).strip().splitlines()[0] if str(exc) else "")
            if not runner.stopping.is_set():  # (a session that ends on a fault: the next one hands them back)
                runner._orphans.extend(rows)
                log.warning("could not hand back %d claimed job(s) now: kept for the next connection that works",
                            len(rows), extra={"database": runner.db.name, "queue": queue, "error": error})
                continue
            log.warning("could not hand back %d claimed job(s): their leases will recover them (the attempt counts)",
                        len(rows), extra={"database": runner.db.name, "queue": queue, "error": error})
            continue
        log_released(runner.db.name, queue, rows, released, "stopping")


async def _interrupt(runner, control: _Control, executing: dict[tuple[int, int], tuple[int, list[Claimed]]],
                     why: str) -> frozenset[int]:
    """End the sessions executing jobs, then record their jobs as interrupted (pending, attempt not counted);
    returns the jobs interrupted."""
    rows = [row for _, batch in executing.values() for row in batch]
    try:
        conn = await control.get()
        for pid, _ in executing.values():
            await conn.execute(queries.TERMINATE, {"pid": pid, "ms": TERMINATE_WAIT_MS})
        try:
            interrupted = await _job_ids(conn, queries.INTERRUPT_TRANSACTION,
                                         arrays(rows) | {"lock_timeout": INTERRUPT_LOCK_TIMEOUT})
        finally:
            await rollback_failed(conn)
    except psycopg.Error as exc:
        log.warning("could not record the interruption of %d job(s): their leases will recover them "
                    "(the attempt counts)", len(rows), extra={
                        "database": runner.db.name, "job_ids": [r.job_id for r in rows],
                        "error": cap_text(str(exc).strip().splitlines()[0] if str(exc) else "")})
        return frozenset()
    for (queue, _), (_, batch) in executing.items():
        for row in batch:
            fields = {"database": runner.db.name, "queue": queue, "job_id": row.job_id, "job_name": row.job_name}
            if row.job_id in interrupted:
                runner.metrics.interrupted.labels(runner.db.name, str(queue)).inc()
                log.warning("job interrupted (%s): back to pending, attempt not counted, dependents kept", why,
                            extra=fields)
            else:
                log.info("job finished before it could be interrupted: its outcome stands", extra=fields)
    return frozenset(interrupted)


async def drain(runner, conn: psycopg.AsyncConnection | None, tasks: list[asyncio.Task]) -> None:
    """Stop claiming, hand back what is not started, let running jobs finish until the deadline (or a second
    signal), then interrupt them; return once every task is done."""
    runner._draining.set()
    for lane in runner._lanes.values():
        lane.wake_all()
    control = _Control(runner, conn)
    try:
        await _hand_back(runner, control)
        pending = await _wait(tasks, runner.settings.shutdown_timeout_sec, runner.hurry)
        if pending:
            executing, interrupted = dict(runner._executing), frozenset()
            if executing:
                why = "second signal" if runner.hurry.is_set() else "shutdown deadline passed"
                runner._interrupting.update(executing)
                interrupted = await _interrupt(runner, control, executing, why)
            pending = await _wait(pending, EXIT_GRACE_SEC, None)
            for task in pending:
                task.cancel()
            await _hand_back(runner, control, interrupted)  # what the workers interrupted had claimed besides
    finally:
        await asyncio.gather(*tasks, return_exceptions=True)
        await control.close()
