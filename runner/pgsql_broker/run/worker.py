"""One queue's worker: claim (broker_get), run what was claimed (broker_run_batch), record the outcomes.

It decides nothing about jobs: broker_get says what runs, broker_run_batch runs it.
"""
from __future__ import annotations

import asyncio
import logging
import time

import psycopg

from ..observe.logs import cap_text
from . import autonomous, queries, stopping
from .connections import job_id_result, rollback_failed
from .queries import Claimed

log = logging.getLogger("pgsql_broker")
# Jobs per transaction at most: each job's subtransaction may take a subtransaction id, and PostgreSQL
# caches 64 per transaction (beyond them every snapshot of every session gets slower).
PER_TRANSACTION = 50


class WorkerInterrupted(Exception):
    """The stop ended this worker's session (shutdown deadline): the stop records its jobs (stopping.py)."""


class WorkerLost(Exception):
    """A worker's connection was lost; `unrun` are the claimed rows it had not started."""

    def __init__(self, cause: psycopg.OperationalError, unrun: list[Claimed]):
        super().__init__(str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__)
        self.unrun = unrun


class QueueWorker:
    """The worker of one queue of a DatabaseRunner (run/database.py), whose state it shares: the stop reads
    its buffer (claimed, not started) and what it is executing."""

    def __init__(self, runner, queue: int):
        self.runner, self.queue = runner, queue
        self.db, self.settings, self.view = runner.db, runner.settings, runner.view
        self.wake = runner._wake[queue]
        self.buffer: list[Claimed] = runner._buffers[queue]

    async def connect(self) -> psycopg.AsyncConnection:
        return await self.runner._connect(f"queue{self.queue}")

    async def run(self) -> None:
        """Drain the queue, then wait for a NOTIFY, the poll timer or shutdown; close the connection when
        idle (worker_idle_timeout_sec, conn_max_idle_time) and renew it after conn_max_lifetime. A lost
        connection (its backend terminated) is this worker's alone: it reconnects and hands back the jobs it
        had claimed but not started (the batch that was running keeps its attempt: lease recovery)."""
        runner = self.runner
        conn: psycopg.AsyncConnection | None = None
        opened = idle_since = time.monotonic()
        try:
            while not runner._draining.is_set():
                if conn is not None and time.monotonic() - opened >= runner._max_lifetime:
                    await conn.close()
                    conn = None
                if conn is None:
                    conn = await self.connect()
                    opened, dirty = time.monotonic(), False
                self.wake.clear()
                if runner._draining.is_set():  # (set while this worker connected: no claim after the stop)
                    break
                try:
                    claimed, dirty = await self._claim_and_run(conn, dirty)
                except WorkerInterrupted:
                    return
                except WorkerLost as lost:
                    await conn.close()
                    conn = await self.connect()  # fails when the database is gone: session restart
                    opened, dirty = time.monotonic(), False
                    await self._hand_back(conn, lost)
                    continue
                if getattr(conn, "broker_big_notice", False):
                    await conn.close()  # its input buffer holds a job's huge notice: give the memory back
                    conn = None
                if claimed:
                    idle_since = time.monotonic()
                    continue
                if conn is not None and time.monotonic() - idle_since >= runner._max_idle:
                    await conn.close()
                    conn = None
                try:
                    await asyncio.wait_for(self.wake.wait(), self.settings.queue_timer_sec)
                except asyncio.TimeoutError:
                    pass
        finally:
            if conn is not None:
                await conn.close()

    async def _hand_back(self, conn: psycopg.AsyncConnection, lost: WorkerLost) -> None:
        released = await stopping.release(conn, lost.unrun)
        log.warning("worker connection lost; reconnected, %d claimed job(s) handed back", len(released),
                    extra={"database": self.db.name, "queue": self.queue, "error": str(lost)})

    async def _claim(self, conn: psycopg.AsyncConnection, dirty: bool) -> list[Claimed]:
        params = {"queue": self.queue, "instance": self.runner.instance_id, "lease": self.settings.lease_seconds,
                  "batch": self.runner._batch}
        try:
            if dirty:
                return await job_id_result(conn, queries.RESET_TRANSACTION + queries.CLAIM, params,
                                           queries.CLAIMED_ROW)
            cur = conn.cursor(row_factory=queries.CLAIMED_ROW)
            return await (await cur.execute(queries.CLAIM, params)).fetchall()
        except psycopg.errors.LockNotAvailable as exc:  # the reset before the claim waited too long
            raise WorkerLost(exc, []) from exc  # nothing after it in the message ran: nothing claimed
        except psycopg.OperationalError as exc:
            if not conn.broken:
                raise
            raise WorkerLost(exc, []) from exc  # lost while idle: nothing claimed (or the claim's leases recover)

    async def _claim_and_run(self, conn: psycopg.AsyncConnection, dirty: bool) -> tuple[bool, bool]:
        """Claim up to fetch_query_que_size (at most queue_buffer_size) jobs in one round trip and run them:
        jobs without a timeout several per transaction (broker_run_batch: each in its own subtransaction, and
        only jobs of one run_as role and tenant together, at most PER_TRANSACTION), a job with a timeout alone
        under its statement_timeout. A job whose lease ran out meanwhile and was claimed elsewhere is skipped.
        `dirty`: jobs ran on this session since its last reset. Every message that follows a transaction of
        jobs starts with the reset (in a transaction of its own, so that what follows starts from the reset
        settings), so the session is clean whenever the worker waits. Returns (claimed, dirty)."""
        started = time.perf_counter()
        got = await self._claim(conn, dirty)
        self.view.claim_seconds[self.queue].observe(time.perf_counter() - started)
        rows = self.buffer  # claimed, not started: the stop takes it over (and hands it back)
        rows.extend(got)
        claimed, dirty = bool(got), False
        while rows and not self.runner._draining.is_set():  # a stop runs nothing more of what was claimed
            # alone: a job with a timeout (statement_timeout covers the whole call), an autonomous job
            alone = rows[0].timeout_ms is not None or rows[0].autonomous
            # (one tenant's jobs per message: broker_run_batch stops at another tenant anyway, and a lost
            # connection then hands back every job of the others)
            taken = rows[:1] if alone else rows[:next((i for i, r in enumerate(rows)
                                                       if r.timeout_ms is not None or r.autonomous
                                                       or r.tenant_id != rows[0].tenant_id), len(rows))]
            batch = taken[:PER_TRANSACTION]
            del rows[:len(batch)]
            try:
                if batch[0].autonomous:  # outside a transaction, on a connection of its own (autonomous.py)
                    await autonomous.run(self.runner, conn, self.queue, batch[0], dirty)
                else:
                    rows[:0] = batch[await self._run_batch(conn, batch, dirty):]
            except psycopg.errors.LockNotAvailable as exc:  # the reset sent before the batch waited too long:
                unrun = batch + rows                          # the batch did not run, every claimed job goes back
                rows.clear()
                raise WorkerLost(exc, unrun) from exc
            except psycopg.OperationalError as exc:
                if not conn.broken:
                    raise
                if self.queue in self.runner._interrupting:  # the stop ended this session and records the batch
                    raise WorkerInterrupted() from exc
                # the batch sent may have run: the crash rule (its attempt counts, lease recovery takes it up),
                # whatever SQLSTATE the lost session reported (a job can make its own backend end with any one,
                # exit_on_error turning its error FATAL); the rest of the claim was not sent and goes back
                unrun = rows[:]
                rows.clear()
                raise WorkerLost(exc, unrun) from exc
            dirty = True
        if rows:  # stopping: hand back on this session what is claimed and not started
            unrun = rows[:]
            rows.clear()
            try:
                released = await stopping.release(conn, unrun, queries.RESET_TRANSACTION if dirty else "")
            except psycopg.OperationalError as exc:
                if not conn.broken:
                    raise
                if self.queue in self.runner._interrupting:
                    rows.extend(unrun)  # the stop hands them back on its own connection
                    raise WorkerInterrupted() from exc
                raise WorkerLost(exc, unrun) from exc
            stopping.log_released(self.db.name, self.queue, unrun, released, "stopping")
            dirty = False
        return claimed, dirty

    async def _run_batch(self, conn: psycopg.AsyncConnection, batch: list[Claimed], dirty: bool) -> int:
        """Run claimed jobs in one transaction, sent as one message (the reset when `dirty`, BEGIN,
        broker_run_batch, COMMIT); returns how many broker_run_batch took up (>= 1). When the transaction fails
        as a whole (say a job's deferred constraint at COMMIT), its jobs run again one per transaction, so that
        one job cannot cost the others an attempt (during a stop they are handed back instead); a single job's
        failed transaction leaves it to lease recovery. The session needs a reset afterwards."""
        queue = self.queue
        self.view.started(queue, batch)
        outcomes = None
        timeout_ms = batch[0].timeout_ms
        params = stopping.arrays(batch) | {"ms": str(timeout_ms)}
        sql = (queries.RESET_TRANSACTION if dirty else "") + (queries.RUN_TRANSACTION_TIMEOUT if timeout_ms
                                                                else queries.RUN_TRANSACTION)
        self.runner._executing[queue] = (conn.info.backend_pid, batch)  # what the stop interrupts at its deadline
        try:
            outcomes = await job_id_result(conn, sql, params, queries.OUTCOME_ROW)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:  # also at COMMIT, after broker_run_batch returned its outcomes
            outcomes = None
            log.warning("a transaction of %d job(s) failed: %s", len(batch),
                        cap_text((str(exc).strip().splitlines() or [""])[0]),
                        extra={"database": self.db.name, "queue": queue, "job_id": batch[0].job_id})
        finally:
            self.runner._executing.pop(queue, None)
            self.view.ended(batch)
            await rollback_failed(conn)
        if outcomes is None:
            for i, row in enumerate(batch if len(batch) > 1 else ()):
                if self.runner._draining.is_set():  # stopping: the rest go back with the jobs not started
                    self.buffer.extend(batch[i:])
                    break
                await self._run_batch(conn, [row], True)
            return len(batch)
        self.view.record_all(queue, batch, outcomes)
        return max(len(outcomes), 1)
