"""The workers of a database: several per queue, each borrowing a connection from the database's pool while
it has work (run/pool.py), none holding one at idle.

A worker claims up to fetch_query_que_size jobs and runs them as broker_claim_batches groups them (batch_no:
the jobs that may share a transaction, under the batch budget, broker_run_batch p_budget, with
statement_timeout = the budget; alone: a transaction of its own). What the worker adds is what it learns while
running a claim: a job the budget ended runs alone, and the jobs of a transaction that failed as a whole run
one per transaction. The bound a user can check: a job's effects commit at most batch_budget_ms after it
ends, and a claimed job starts, or is back to pending, within batch_budget_ms of its claim. For it:
- every transaction of one claim shares the claim's budget: a new one starts only while half of it is left,
  under statement_timeout = what is left; broker_run_batch starts no job after half of that, and the job the
  timeout ends is rolled back alone, marked run_alone and returned claimed (PB002, attempt not counted);
- a job that runs alone (broker_claim_batches: autonomous, marked run_alone, a timeout shorter than the budget,
  or a queue of one_job_per_transaction_queues; or learned here) starts only after the worker handed back what
  else it claimed (broker_release_jobs, attempt not counted), so that other workers take it up.
The stop (stopping.py) takes over what a worker claimed and has not started (its buffer) and interrupts the
transaction it executes past shutdown_timeout_sec.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

import psycopg

from ..observe.logs import cap_text
from . import autonomous, queries, stopping
from .connections import job_id_result, rollback_failed
from .lost_claims import LEARNED_MAX, LostClaims, WorkerLost
from .queries import Claimed, Outcome

log = logging.getLogger("pgsql_broker")
RUNS_ALONE = "PB002"  # broker_run_batch: the job runs in a transaction of its own (still claimed, attempt kept)
CANCELLED: list = []  # _run_in_transaction: the budget's timeout ended the whole transaction (nothing kept)


class WorkerInterrupted(Exception):
    """The stop ended this worker's session (shutdown deadline): the stop records its jobs (stopping.py)."""


class Lane:
    """The idle workers of one queue: a wake-up goes to one of them; with none idle it is kept for the next."""

    def __init__(self) -> None:
        self.idle: list[asyncio.Event] = []
        self.pending = False

    def wake_one(self) -> None:
        if self.idle:
            self.idle.pop(0).set()
        else:
            self.pending = True

    def wake_all(self) -> None:
        self.pending = True
        for event in self.idle:
            event.set()

    async def wait(self, event: asyncio.Event) -> None:
        if self.pending:
            self.pending = False
            return
        self.idle.append(event)
        try:
            await event.wait()
        finally:
            event.clear()
            if event in self.idle:
                self.idle.remove(event)


class Workers(LostClaims):
    """The worker part of DatabaseRunner (run/database.py; a mixin: it shares the runner's state with
    stopping.py, which reads each worker's buffer and what it executes)."""

    def _learn_alone(self, job_ids) -> None:
        """Jobs that run alone from now on, for every worker of this database (bounded: the extension's
        run_alone marks the ones the budget ended; this also covers a transaction the budget ended whole)."""
        if len(self._learned_alone) > LEARNED_MAX:
            self._learned_alone.clear()
        self._learned_alone.update(job_ids)

    def _alone(self, row: Claimed, alone_ids: set[int]) -> bool:
        return row.alone or row.job_id in alone_ids  # (broker_claim_batches, or learned while running)

    async def _worker(self, queue: int, index: int) -> None:
        """Wait for a wake-up (NOTIFY, the session's poll, another worker that claimed a full batch), borrow a
        connection, drain the queue, give the connection back. A lost connection (its backend terminated) is
        this worker's alone: it takes another and hands back the jobs it had claimed but not started (the
        batch that was running keeps its attempt: lease recovery)."""
        key, lane, event = (queue, index), self._lanes[queue], asyncio.Event()
        while not self._draining.is_set():
            await lane.wait(event)
            if self._draining.is_set():
                break
            self._busy_workers += 1  # (a database whose workers are busy keeps its session: run/rota.py)
            try:
                if await self._drain_queue(key):
                    return
            finally:
                self._busy_workers -= 1
                self._idle_since = time.monotonic()

    async def _drain_queue(self, key: tuple[int, int]) -> bool:
        """Claim and run until the queue has nothing claimable (or the stop), on one borrowed connection;
        True when the stop interrupted this worker (it ends)."""
        queue = key[0]
        conn: psycopg.AsyncConnection | None = await self.pool.get()
        try:
            while not self._draining.is_set():
                try:
                    claimed = await self._claim_and_run(conn, key)
                except WorkerInterrupted:
                    return True
                except WorkerLost as lost:
                    lost.again = self._first_loss(lost.running)
                    await conn.close()
                    await self.pool.put(conn)
                    conn = None
                    try:
                        conn = await self.pool.get()  # fails when the database is gone: session restart
                    except BaseException:
                        self._keep_orphans(lost)  # (handed back by the next session that works)
                        raise
                    await self._hand_back_lost(conn, queue, lost)
                    continue
                if getattr(conn, "broker_big_notice", False):
                    await conn.close()  # its input buffer holds a job's huge notice: give the memory back
                    await self.pool.put(conn)
                    conn = None
                    if not claimed:
                        break
                    conn = await self.pool.get()
                if not claimed:
                    break
        finally:
            if conn is not None:
                await self.pool.put(conn)
        return False

    async def _release_claimed(self, conn: psycopg.AsyncConnection, key: tuple[int, int], unrun: list[Claimed],
                               why: str) -> None:
        """Hand back claimed rows, already taken out of the buffer, on this worker's session (the session reset
        first when it is dirty)."""
        pid = conn.info.backend_pid
        try:
            with self._deadline(conn, "handing back claims"):
                released = await stopping.release(conn, unrun, queries.RESET_TRANSACTION if conn.broker_dirty else "")
        except psycopg.errors.LockNotAvailable as exc:  # the reset sent first waited too long
            raise WorkerLost(exc, unrun) from exc
        except psycopg.OperationalError as exc:
            if conn.broken and key in self._interrupting:
                self._buffers[key].extend(unrun)  # the stop hands them back on its own connection
                raise WorkerInterrupted() from exc
            # lost, or a cancel that came late: the rows go back on a new connection (or are kept)
            raise WorkerLost(exc, unrun, pid=pid) from exc
        except psycopg.Error as exc:  # (say the login lost broker_runtime): kept, handed back once it can be
            raise WorkerLost(exc, unrun, pid=pid) from exc
        conn.broker_dirty = False
        stopping.log_released(self.db.name, key[0], unrun, released, why)
        self._keep_unreleased(unrun, released)

    async def _claim_and_run(self, conn: psycopg.AsyncConnection, key: tuple[int, int]) -> bool:
        """Claim up to fetch_query_que_size (at most queue_buffer_size) jobs in one round trip and run them
        (module docstring). A job whose lease ran out meanwhile and was claimed elsewhere is skipped. Every
        message that follows a transaction of jobs starts with the session reset (in a transaction of its own,
        so that what follows starts from the reset settings): the session is clean whenever the worker waits.
        Returns whether it claimed anything."""
        queue = key[0]
        started = time.perf_counter()
        token = str(uuid.uuid4())  # (the claim's lease token: the runner can hand back a claim it never saw)
        params = {"queue": queue, "instance": self.instance_id, "lease": self.settings.lease_seconds,
                  "batch": self._batch, "budget": f"{self.settings.batch_budget_ms} milliseconds",
                  "alone": queue in self._alone_queues, "token": token}
        dirty, pid = conn.broker_dirty, conn.info.backend_pid
        try:
            with self._deadline(conn, "claiming"):
                got = await job_id_result(conn, (queries.RESET_TRANSACTION if dirty else "") + queries.CLAIM_RELAXED,
                                          params, queries.CLAIMED_ROW)
        except psycopg.errors.LockNotAvailable as exc:  # the reset before the claim waited too long
            raise WorkerLost(exc, []) from exc  # nothing after it in the message ran: nothing claimed
        except psycopg.errors.QueryCanceled:  # a job's cancel that came late (cancelling.py): transient
            await rollback_failed(conn)
            if dirty:  # the reset may be what it cancelled: again, so the session is clean when the worker waits
                await conn.execute(queries.RESET_TRANSACTION)
            return []
        except psycopg.OperationalError as exc:
            if not conn.broken:
                raise
            raise WorkerLost(exc, [], token, pid=pid) from exc  # the claim may have committed: handed back by its token
        claimed_at = time.monotonic()
        conn.broker_dirty = False
        self.view.claim_seconds[queue].observe(time.perf_counter() - started)
        if len(got) >= self._batch:
            self._lanes[queue].wake_one()  # a full claim: probably more work, bring another worker in
        rows = self._buffers[key]  # claimed, not started: the stop takes it over (and hands it back)
        rows.extend(got)
        budget_ms = self.settings.batch_budget_ms
        alone_ids = self._learned_alone  # learned from broker_run_batch (PB002) and cancelled transactions
        # of a transaction that failed as a whole, or whose session died: one per transaction now
        single_ids: set[int] = {r.job_id for r in got if r.job_id in self._learned_single}
        first = True
        while rows and not self._draining.is_set():  # a stop runs nothing more of what was claimed
            head = rows[0]
            if self._alone(head, alone_ids):
                if len(rows) > 1:
                    rest = rows[1:]
                    del rows[1:]
                    await self._release_claimed(conn, key, rest, "claimed with a job that runs alone")
                if head.autonomous:  # outside a transaction, on a connection of its own (autonomous.py)
                    del rows[:1]
                    first = False
                    try:
                        await autonomous.run(self, conn, queue, head, conn.broker_dirty)
                    except psycopg.OperationalError as exc:
                        if not conn.broken:
                            raise
                        raise WorkerLost(exc, []) from exc  # (its lease recovers it: the crash rule)
                    conn.broker_dirty = False
                    continue
                batch, budget = rows[:1], None
            else:
                left_ms = int(budget_ms - (time.monotonic() - claimed_at) * 1000)
                if not first and left_ms < budget_ms // 2:  # (a transaction of these may not end in time)
                    rest = rows[:]
                    rows.clear()
                    await self._release_claimed(conn, key, rest, "the claim's batch budget is spent")
                    break
                if head.job_id in single_ids:
                    batch = rows[:1]
                else:
                    end = next((i for i, r in enumerate(rows) if r.batch_no != head.batch_no
                                or self._alone(r, alone_ids) or r.job_id in single_ids), len(rows))
                    batch = rows[:end]
                # (a job alone in the transaction with nothing claimed behind it: no one waits for it)
                budget = max(left_ms, 10) if len(batch) > 1 or len(rows) > 1 else None
            del rows[:len(batch)]
            first = False
            outcomes = await self._run_in_transaction(conn, key, batch, budget)
            if outcomes is CANCELLED:  # each alone now, without a budget (also when another worker claims it)
                self._learn_alone(r.job_id for r in batch)
                rows[:0] = batch
                continue
            if outcomes is None:  # failed as a whole (say a deferred constraint at COMMIT): one per transaction
                if len(batch) > 1:
                    single_ids.update(r.job_id for r in batch)
                    rows[:0] = batch
                continue
            again = [row for row, out in zip(batch, outcomes) if out.status is None and out.error_sqlstate == RUNS_ALONE]
            self._learn_alone(r.job_id for r in again)
            for row in again:
                log.info("job runs alone: it ran past the batch budget, or must not run under one; attempt not "
                         "counted", extra={"database": self.db.name, "queue": queue, "job_id": row.job_id,
                                           "job_name": row.job_name})
            done = [(row, out) for row, out in zip(batch, outcomes) if out.error_sqlstate != RUNS_ALONE]
            self.view.record_all(queue, [r for r, _ in done], [o for _, o in done])
            not_started = batch[len(outcomes):]
            if not outcomes and not_started:
                self._learn_alone([not_started[0].job_id])  # (the budget ended the call between two jobs)
            rows[:0] = again + not_started
        if rows:  # stopping: hand back on this session what is claimed and not started
            rest = rows[:]
            rows.clear()
            await self._release_claimed(conn, key, rest, "stopping")
        return bool(got)

    async def _run_in_transaction(self, conn: psycopg.AsyncConnection, key: tuple[int, int], batch: list[Claimed],
                                  budget_ms: int | None) -> list[Outcome] | None:  # (or CANCELLED)
        """Run claimed jobs in one transaction, sent as one message (the reset when the session is dirty,
        BEGIN, statement_timeout: the budget, or the job's timeout when it runs alone, broker_run_batch,
        COMMIT); returns broker_run_batch's outcomes, None when the transaction failed as a whole (also at
        COMMIT; a single job's failed transaction leaves it to lease recovery). A lost session raises
        WorkerLost (the crash rule for the batch sent, whatever SQLSTATE it reported: a job can make its own
        backend end with any one; the rest of the claim goes back) or WorkerInterrupted (the stop ended it)."""
        queue = key[0]
        self.view.started(queue, batch, "executing" if len(batch) == 1 else "waiting")
        params = stopping.arrays(batch) | {"ms": str(batch[0].timeout_ms), "budget_ms": str(budget_ms),
                                           "budget": f"{budget_ms} milliseconds" if budget_ms else None}
        sql = (queries.RESET_TRANSACTION if conn.broker_dirty else "") + (
            queries.RUN_TRANSACTION_BUDGET if budget_ms else
            queries.RUN_TRANSACTION_TIMEOUT if batch[0].timeout_ms else queries.RUN_TRANSACTION)
        self._executing[key] = (conn.info.backend_pid, batch)  # what the stop interrupts at its deadline
        self._executing_since[key] = time.monotonic()
        conn.broker_dirty = True
        try:
            return await job_id_result(conn, sql, params, queries.OUTCOME_ROW)
        except psycopg.errors.LockNotAvailable as exc:  # the reset sent before the batch waited too long:
            unrun = batch + self._buffers[key]            # the batch did not run, every claimed job goes back
            self._buffers[key].clear()
            raise WorkerLost(exc, unrun) from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            if await self._may_run_jobs(conn):
                self._failed_as_a_whole(queue, batch, exc)
                return None
            unrun = batch + self._buffers[key]  # the runner's login lost broker_runtime: nothing of it ran
            self._buffers[key].clear()
            raise WorkerLost(exc, unrun) from exc
        except psycopg.OperationalError as exc:
            if conn.broken:
                if key in self._interrupting:  # the stop ended this session and records the batch
                    raise WorkerInterrupted() from exc
                unrun = self._buffers[key][:]
                self._buffers[key].clear()
                raise WorkerLost(exc, unrun, running=batch, pid=self._executing.get(key, (None,))[0]) from exc
            if budget_ms and isinstance(exc, psycopg.errors.QueryCanceled):
                # the budget's timeout fired outside every job (a slow or busy server): nothing of the
                # transaction is kept, no job failed, the jobs are still claimed
                log.info("a transaction of %d job(s) went past the batch budget before its jobs ran: they run "
                         "again, one per transaction", len(batch), extra={"database": self.db.name, "queue": queue})
                return CANCELLED
            self._failed_as_a_whole(queue, batch, exc)
            return None
        except psycopg.Error as exc:
            self._failed_as_a_whole(queue, batch, exc)
            return None
        finally:
            self._executing.pop(key, None)
            self._executing_since.pop(key, None)
            self.view.ended(batch)
            await rollback_failed(conn)

    @staticmethod
    async def _may_run_jobs(conn: psycopg.AsyncConnection) -> bool:
        """Whether the login may still call broker_run_batch (a 42501 from the run may be a job's own)."""
        await rollback_failed(conn)
        try:
            return (await (await conn.execute(queries.MAY_RUN_JOBS)).fetchone())[0]
        except psycopg.errors.InsufficientPrivilege:
            return False

    def _failed_as_a_whole(self, queue: int, batch: list[Claimed], exc: psycopg.Error) -> None:
        log.warning("a transaction of %d job(s) failed: %s", len(batch),
                    cap_text((str(exc).strip().splitlines() or [""])[0]),
                    extra={"database": self.db.name, "queue": queue, "job_id": batch[0].job_id})
