"""Claims a worker lost with its connection (the server restarted or went away, a network reset or stall, the
login refused for a while, a job that ended its own session): what goes back to pending without an attempt,
what is kept until a connection works again, and what is left to lease recovery. The rule of attempts is the
one docs/state-machine.md states ("Which transitions count an attempt"); the database's part of it is
broker_recover_stale_jobs (claims made before the server started), broker_release_jobs and
broker_release_claim. A mixin of Workers (run/worker.py): it shares the runner's state (_orphans,
_orphans_alone, _orphan_claims, _lost_runs, _learned_single, set in run/database.py).
"""
from __future__ import annotations

import asyncio
import logging

import psycopg

from . import queries, stopping
from .queries import Claimed

log = logging.getLogger("pgsql_broker")
LEARNED_MAX = 100_000  # job ids remembered per set before it starts afresh
BACKEND_GONE_POLLS, BACKEND_GONE_POLL_SEC = 50, 0.1  # a lost connection's backend: waited for at most 5 s


class WorkerLost(Exception):
    """A worker's connection was lost, or the server refused the runner's own call to run jobs (a privilege
    revoked: nothing of it ran). `unrun`: the claimed rows it had not started; `claim`: the lease token of a
    claim whose answer was lost with the connection (it may have committed: none of its jobs started);
    `running`: the jobs of the transaction the lost session was running (see LostClaims._first_loss); `pid`: the
    lost session's backend, whose transaction holds its rows until the backend has ended."""

    def __init__(self, cause: psycopg.Error, unrun: list[Claimed], claim: str | None = None,
                 running: list[Claimed] | None = None, pid: int | None = None):
        super().__init__(str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__)
        self.unrun, self.claim, self.running, self.pid = unrun, claim, running or [], pid
        self.again: list[Claimed] = []  # of `running`, what goes back (LostClaims._first_loss)


class LostClaims:
    """Handing back what a worker lost (run/worker.py raises WorkerLost; the session hands back orphans)."""

    def _learn_single(self, job_ids) -> None:
        """Jobs that run in a transaction of their own from now on, for every worker of this database, without
        holding up what is claimed with them (see _first_loss). Bounded (LEARNED_MAX)."""
        if len(self._learned_single) > LEARNED_MAX:
            self._learned_single.clear()
        self._learned_single.update(job_ids)

    def _first_loss(self, running: list[Claimed]) -> list[Claimed]:
        """Of the jobs of a transaction whose session died, those that go back without an attempt. The database
        cannot tell a job that ended its own session (a poison job: out of memory, pg_terminate_backend) from a
        network reset or an operator's pg_terminate_backend. So: the jobs of a transaction of several all go
        back, each to run in a transaction of its own from then on (one of them at most was executing); a job
        alone in its transaction goes back the first time this runner loses a session under it, and counts its
        lost attempt the second time (lease recovery), so that a poison job still uses up its attempts.
        Bounded (LEARNED_MAX)."""
        if len(running) != 1:
            return running
        if len(self._lost_runs) > LEARNED_MAX:
            self._lost_runs.clear()
        if running[0].job_id in self._lost_runs:
            return []
        self._lost_runs.add(running[0].job_id)
        return running

    async def _hand_back_lost(self, conn: psycopg.AsyncConnection, queue: int, lost: WorkerLost) -> None:
        """Hand back what a lost connection had claimed and not started; when that fails too (the server went
        away again, the login is refused), keep it for the next session that works and end this one."""
        try:
            gone = await self._backend_gone(conn, lost.pid)
            with self._deadline(conn, "handing back claims"):
                released = await stopping.release(conn, lost.unrun)
                if lost.claim is not None and gone:
                    released |= await stopping.release_claim(conn, lost.claim)
                elif lost.claim is not None:  # (its claim may still commit: handed back once the backend ended)
                    self._orphan_claims.append((lost.claim, lost.pid))
                released |= await stopping.release(conn, lost.again)
        except psycopg.Error:
            self._keep_orphans(lost)
            raise
        self._keep_unreleased(lost.unrun + lost.again, released)
        self._learn_single(r.job_id for r in lost.again)
        log.warning("worker connection lost; reconnected, %d claimed job(s) handed back", len(released),
                    extra={"database": self.db.name, "queue": queue, "error": str(lost)})

    def _keep_unreleased(self, rows: list[Claimed], released: set[int]) -> None:
        """Rows a hand-back did not release go back once more at the next recovery: broker_release_jobs skips
        a row another session holds locked for a moment (a worker of a session that ended, sending a run with
        the token of an older claim of the job, which broker_run_batch then refuses), and a row dropped here
        would be left to lease recovery, which counts its attempt. A row whose claim had ended is not released
        then either, and is dropped."""
        self._orphans.extend(r for r in rows if r.job_id not in released)

    def _keep_orphans(self, lost: WorkerLost) -> None:
        self._orphans.extend(lost.unrun)
        self._orphans_alone.extend(lost.again)  # (in the database: a crash restart may have been their doing)
        if lost.claim is not None and (lost.claim, lost.pid) not in self._orphan_claims:
            self._orphan_claims.append((lost.claim, lost.pid))

    @staticmethod
    async def _backend_gone(conn: psycopg.AsyncConnection, pid: int | None, polls: int = BACKEND_GONE_POLLS) -> bool:
        """Wait (a bounded while) for a lost connection's backend to end; whether it has. A backend that ended
        itself reports it before its transaction ends, and a release in between would skip the rows it still
        holds. One that runs on (a network reset: the server did not notice) is not waited for long; its rows
        stay its own."""
        for i in range(polls if pid else 0):
            if (await (await conn.execute(queries.BACKEND_GONE, {"pid": pid})).fetchone())[0]:
                return True
            if i + 1 < polls:
                await asyncio.sleep(BACKEND_GONE_POLL_SEC)
        return not pid

    async def _hand_back_orphans(self, conn: psycopg.AsyncConnection) -> None:
        """Hand back the claims that workers lost with their connection and could not hand back then (kept for
        the next connection that works; those whose lease recovery took meanwhile are not released)."""
        for rows_of, alone, why in ((self._orphans, False, "its worker's connection was lost, or it was busy"),
                                    (self._orphans_alone, True, "its transaction's session was lost; it runs alone "
                                                                "from now on")):
            while rows_of:
                rows = rows_of[:1000]  # (broker_release_jobs takes at most 1000)
                with self._deadline(conn, "handing back claims"):
                    released = await stopping.release(conn, rows, alone=alone)
                del rows_of[:len(rows)]
                for queue in sorted({r.job_queue for r in rows}):
                    stopping.log_released(self.db.name, queue, [r for r in rows if r.job_queue == queue], released,
                                          why)
        for token, pid in list(self._orphan_claims):
            with self._deadline(conn, "handing back claims"):
                if not await self._backend_gone(conn, pid, polls=1):
                    continue  # (its claim may still commit: at the next recovery)
                released = await stopping.release_claim(conn, token)
            self._orphan_claims.remove((token, pid))
            if released:
                log.info("a claim whose answer was lost handed back: %d job(s) back to pending, attempt not counted",
                         len(released), extra={"database": self.db.name, "job_ids": sorted(released)})
