"""Cancelling running jobs (broker_cancel_job on a running job).

The extension records a cancel request and sends NOTIFY pgsql_broker '<database>/cancel/<job id>'. Any login
may NOTIFY, so the payload is only a hint: on the session connection the runner asks broker_cancel_requests which
of the jobs it is executing have a request the policies accepted, and cancels the statement of the worker backend
executing each of them (pg_cancel_backend: the workers are sessions of the runner's own login, which needs no
superuser). The job's subtransaction gets 57014 and broker_run_batch ends it cancelled. An autonomous job runs on
a connection of its own, maybe another login's (run/autonomous.py): its statement is cancelled through that
connection's cancel key, and broker_autonomous_end ends it cancelled. The runner also asks
every POLL_SEC for the jobs it executes, so a NOTIFY lost while the session reconnected is not a cancel lost.

Only a job alone in its transaction is signalled: in a transaction of several jobs the signal would cancel
whichever of them executes, failing that one. Such a transaction runs under the batch budget (run/worker.py):
the job asked for keeps its result if it completes first, else the budget's timeout ends it and, under its
request, it ends cancelled (broker_run_batch); a job the budget handed back runs alone and is signalled then.

A cancel is sent once per executing batch and job. One that reaches a backend whose batch ended meanwhile is
ignored by PostgreSQL when the backend is idle; one that reaches the worker's next statement fails it with
57014, which the worker treats as transient (run/worker.py: the claim is retried, a transaction of jobs runs again
one job per transaction). An autonomous job's connection runs nothing but the job's one statement, so its cancel
is sent again every POLL_SEC while the job still runs there: the first one may have reached the connection in the
moment before the statement did, when PostgreSQL ignores it. (A batch's cancel is not sent again: the batch goes
on with its other jobs on the same backend after the cancelled one ended.)
"""
from __future__ import annotations

import logging
import time

import psycopg

from . import queries

log = logging.getLogger("pgsql_broker")
POLL_SEC = 1.0
CHECK_AT_ONCE = 1000  # broker_cancel_requests takes at most 1000 ids
PREFIX = "cancel/"


class Canceller:
    """Per database runner: the hints received, and what was cancelled."""

    def __init__(self, database: str, executing: dict[tuple[int, int], tuple[int, list[tuple]]], counter,
                 autonomous: dict[int, tuple[int, psycopg.AsyncConnection]] | None = None) -> None:
        """`executing`: the runner's map (queue, worker) -> (backend pid, batch rows, job_id first), kept by the
        workers; `autonomous`: job id -> (queue, its own connection) of the autonomous jobs executing."""
        self.database, self.executing, self.counter = database, executing, counter
        self.autonomous = autonomous if autonomous is not None else {}
        self._hints: set[int] = set()
        self._sent: dict[tuple[int, int, int], float] = {}  # (job_id, pid, id of the batch) cancelled -> when
        self._next_poll = 0.0

    def hint(self, payload: str) -> bool:
        """Take a NOTIFY payload (after '<database>/'); True when it was a cancel hint (valid or not)."""
        if not payload.startswith(PREFIX):
            return False
        job = payload[len(PREFIX):]
        if job.isascii() and job.isdigit() and len(job) <= 18:
            self._hints.add(int(job))
        return True

    def _running(self) -> dict[int, tuple[int, int, int, bool]]:
        """job id -> (queue, backend pid, id of its batch, whether it may be signalled: alone in its transaction)."""
        running = {row[0]: (key[0], pid, id(batch), len(batch) == 1)
                   for key, (pid, batch) in list(self.executing.items()) for row in batch}
        for job_id, (queue, conn) in list(self.autonomous.items()):
            running[job_id] = (queue, conn.info.backend_pid, id(conn), True)
        return running

    async def apply(self, conn: psycopg.AsyncConnection) -> None:
        """Cancel the executing jobs that have a cancel request (hinted ones now, all of them every POLL_SEC)."""
        now = time.monotonic()
        if not self._hints and now < self._next_poll:
            return  # (the session calls this at every wake-up: nothing to look at)
        running = self._running()
        wanted = self._hints & running.keys()
        if now >= self._next_poll:
            wanted, self._next_poll = set(running), now + POLL_SEC
        self._hints.clear()
        still = {(job_id, pid, batch) for job_id, (_, pid, batch, _) in running.items()}
        self._sent = {key: at for key, at in self._sent.items() if key in still}
        if not wanted:
            return
        ordered, confirmed = sorted(wanted), []
        for i in range(0, len(ordered), CHECK_AT_ONCE):
            ids = "{" + ",".join(str(j) for j in ordered[i:i + CHECK_AT_ONCE]) + "}"
            confirmed += [r[0] for r in await (await conn.execute(queries.CANCEL_REQUESTS, {"jobs": ids})).fetchall()]
        for job_id in confirmed:
            now_running = self._running().get(job_id)
            if now_running is None or not now_running[3]:
                continue  # finished meanwhile (it keeps its result), or not alone (see above)
            queue, pid, batch, _ = now_running
            own = self.autonomous.get(job_id)
            sent_at = self._sent.get((job_id, pid, batch))
            if sent_at is not None and (own is None or now - sent_at < POLL_SEC):
                continue  # already cancelled (an autonomous job's cancel again after POLL_SEC)
            if own is not None:
                await own[1].cancel_safe(timeout=5)  # (its backend may be another login's: the cancel key works)
            else:
                await conn.execute(queries.CANCEL_BACKEND, {"pid": pid})
            self._sent[(job_id, pid, batch)] = now
            if sent_at is not None:
                log.info("cancelling a running job again (its statement was still running)",
                         extra={"database": self.database, "queue": queue, "job_id": job_id})
                continue
            self.counter.labels(self.database, str(queue)).inc()
            log.info("cancelling a running job (cancel request)", extra={"database": self.database, "queue": queue,
                                                                        "job_id": job_id})
