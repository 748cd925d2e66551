"""The runner engine: per database one LISTEN connection (which also holds the
instance lock), one worker per queue, and a maintenance task. It decides
nothing about jobs: broker_get says what runs, broker_run runs it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from dataclasses import dataclass, field

import psycopg
from psycopg import errors

from . import __version__, autonomous, queries, stopping
from .config import DatabaseConfig, parse_duration
from .login import LoginRefused, check_login
from .logs import RateLimitedWarning, cap_text, short_label
from .metrics import Metrics, bounded_stats, observe_many
from .scheduler import tick_schedules
from .settings import BrokerSettings

log = logging.getLogger("pgsql_broker")
SUPPORTED_SCHEMA = ("0.2.0",)
PING_SEC = 5.0
STOP_POLL_SEC = 0.2  # the listen loop notices a stop this often (an idle runner stops within a second)
# Jobs per transaction at most: each job's subtransaction may take a subtransaction id, and PostgreSQL
# caches 64 per transaction (beyond them every snapshot of every session gets slower).
PER_TRANSACTION = 50
STANDBY_RETRY_SEC = 2.0
# Deferred dependency releases: how often the maintenance task looks for them (at most queue_timer_sec).
RELEASE_POLL_SEC = 1.0


class SchemaError(Exception):
    """The database has no pgsql_broker schema this runner can work with."""


BIG_NOTICE_CHARS = 1_000_000  # a worker connection that received a longer notice is closed after its jobs


class WorkerInterrupted(Exception):
    """The stop ended this worker's session (shutdown deadline): the stop records its jobs (stopping.py)."""


class WorkerLost(Exception):
    """A worker's connection was lost; `unrun` are the claimed rows it had not started."""

    def __init__(self, cause: psycopg.OperationalError, unrun: list[tuple]):
        super().__init__(str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__)
        self.unrun = unrun


@dataclass
class JobView:
    job_id: int
    name: str
    queue: int
    tenant: str
    started: float = field(default_factory=time.time)


class DatabaseRunner:
    """Serves one database: active while it holds the instance lock, standby otherwise."""

    def __init__(self, db: DatabaseConfig, settings: BrokerSettings, metrics: Metrics, stopping: asyncio.Event,
                 hurry: asyncio.Event | None = None):
        """`stopping`: stop (running jobs may finish until shutdown_timeout_sec); `hurry`: interrupt them now."""
        self.db, self.settings, self.metrics, self.stopping = db, settings, metrics, stopping
        self.hurry = hurry if hurry is not None else asyncio.Event()
        self.role = "starting"
        self.listening = False
        self.instance_id: int | None = None
        self.error: str | None = None
        self.running: dict[int, JobView] = {}
        self.failures: deque[dict] = deque(maxlen=20)
        self.finished_at: deque[float] = deque(maxlen=100_000)
        self.queue_stats: list[dict] = []
        self.instances: list[dict] = []
        self._wake = {q: asyncio.Event() for q in range(1, db.queue_count + 1)}
        self._schedules_changed = asyncio.Event()
        self._bad_notify = RateLimitedWarning(log, "ignored malformed NOTIFY payload(s)", {"database": db.name})
        self.next_schedule_fire = None
        self._draining = asyncio.Event()
        # per queue: the jobs its worker claimed and has not started, and the batch it is executing (with the
        # backend pid that executes it); the stop hands back the first and interrupts the second (stopping.py)
        self._buffers: dict[int, list[tuple]] = {q: [] for q in self._wake}
        self._executing: dict[int, tuple[int, list[tuple]]] = {}
        self._interrupting: set[int] = set()
        self._batch = min(settings.fetch_query_que_size, settings.queue_buffer_size)
        self._max_lifetime = parse_duration(db.conn_max_lifetime)
        self._max_idle = min(parse_duration(db.conn_max_idle_time), settings.worker_idle_timeout_sec)
        # per-job hot path: the metric children of each queue, looked up once
        self._duration = {q: metrics.duration.labels(db.name, str(q)) for q in self._wake}
        self._completed = {q: metrics.completed.labels(db.name, str(q)) for q in self._wake}
        self._claim_seconds = {q: metrics.claim_seconds.labels(db.name, str(q)) for q in self._wake}

    # -- supervision ---------------------------------------------------------
    async def run(self) -> None:
        """Keep a session to the database until shutdown; reconnect with backoff, log each outage once."""
        delay, logged = 1.0, False
        while not self.stopping.is_set():
            try:
                await self._session()
                delay, logged = 1.0, False
            except LoginRefused:
                raise  # the process exits: no retry makes the login safe
            except (psycopg.OperationalError, SchemaError) as exc:
                self.error = cap_text((str(exc).strip().splitlines() or [""])[0])
                if not logged:
                    log.warning("database unavailable, retrying with backoff", extra={"database": self.db.name,
                                                                                      "error": self.error})
                    logged = True
            except Exception as exc:  # never let one database stop the others
                self.error = cap_text(f"{type(exc).__name__}: {exc}".strip().splitlines()[0])
                log.exception("unexpected error, restarting this database's session",
                              extra={"database": self.db.name})
            finally:
                self.role, self.listening, self.instance_id = "disconnected", False, None
                self.metrics.set_role(self.db.name, active=False, listening=False)
            if not self.stopping.is_set():
                try:
                    await asyncio.wait_for(self.stopping.wait(), delay)
                except asyncio.TimeoutError:
                    pass
                delay = min(delay * 2, self.settings.notify_retry_seconds)

    async def _connect(self, purpose: str) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self.db.dsn(), autocommit=True,
                                                     application_name=f"{self.settings.name}:{purpose}")
        conn.prepare_threshold = None  # workers reset the session (DEALLOCATE ALL) after every transaction of jobs
        if purpose.startswith("queue"):
            # a job's NOTICE or WARNING reaches this connection whole (the job sets client_min_messages as it
            # likes), and libpq keeps its input buffer at the largest message it read: a connection that read
            # a large one is closed after its transaction (see _worker), so a job cannot keep the runner big
            conn.broker_big_notice = False  # type: ignore[attr-defined]

            def on_notice(diag: psycopg.errors.Diagnostic, conn=conn) -> None:
                if len(diag.message_primary or "") + len(diag.message_detail or "") > BIG_NOTICE_CHARS:
                    conn.broker_big_notice = True  # type: ignore[attr-defined]
            conn.add_notice_handler(on_notice)
        return conn

    async def _session(self) -> None:
        async with await self._connect("listen") as conn:
            has_schema = (await (await conn.execute("SELECT to_regnamespace('broker') IS NOT NULL")).fetchone())[0]
            version = (await (await conn.execute(queries.SCHEMA_VERSION)).fetchone())[0] if has_schema else None
            if version not in SUPPORTED_SCHEMA:
                raise SchemaError(f"database {self.db.name} has pgsql_broker schema {version or 'none'}; this runner "
                                  f"needs {', '.join(SUPPORTED_SCHEMA)}: run `pgsql-broker install`")
            await check_login(conn, self.db.name, self.settings.allow_privileged_login)
            await conn.execute(queries.LISTEN)
            await conn.execute(queries.LISTEN_SCHEDULES)
            self.listening, self.error = True, None
            if not await self._become_active(conn):
                return
            log.info("active instance", extra={"database": self.db.name, "instance": self.instance_id})
            self._draining.clear()
            self._interrupting.clear()  # (a session restarted after a drain: its workers are new)
            tasks = [asyncio.create_task(self._worker(q)) for q in self._wake]
            tasks.append(asyncio.create_task(self._maintenance()))
            tasks.append(asyncio.create_task(tick_schedules(self._connect, self.db.name, self._schedules_changed,
                                                            self._draining, self.metrics, self._planned)))
            try:
                await self._listen(conn, tasks)
            finally:
                await stopping.drain(self, conn, tasks)
                if not conn.closed and self.instance_id is not None:
                    try:
                        await conn.execute(queries.SHUTDOWN, {"instance": self.instance_id})
                    except psycopg.Error:
                        pass

    async def _become_active(self, conn: psycopg.AsyncConnection) -> bool:
        while not self.stopping.is_set():
            try:
                cur = await conn.execute(queries.REGISTER, {"name": self.settings.name, "host": socket.gethostname(),
                                                            "pid": os.getpid(), "queues": self.db.queue_count,
                                                            "version": __version__})
                self.instance_id = (await cur.fetchone())[0]
                self.role = "active"
                self.metrics.set_role(self.db.name, active=True, listening=True)
                return True
            except errors.LockNotAvailable:
                if self.role != "standby":
                    log.info("another instance is active: standing by", extra={"database": self.db.name})
                self.role = "standby"
                self.metrics.set_role(self.db.name, active=False, listening=True)
                async for _ in conn.notifies(timeout=STANDBY_RETRY_SEC):  # keep the socket serviced
                    pass
        return False

    async def _listen(self, conn: psycopg.AsyncConnection, tasks: list[asyncio.Task]) -> None:
        """Dispatch wake-ups, ping the instance row; return on shutdown, raise when the connection is lost."""
        prefix = f"{conn.info.dbname}/"
        next_ping = 0.0
        while not self.stopping.is_set():
            if any(t.done() and t.exception() for t in tasks):
                raise next(t.exception() for t in tasks if t.done() and t.exception())
            async for note in conn.notifies(timeout=STOP_POLL_SEC):
                if note.channel == "pgsql_broker_schedule":
                    self._schedules_changed.set()
                elif note.payload.startswith(prefix):
                    self._wake_queue(note.channel, note.payload[len(prefix):])
                if self.stopping.is_set():
                    break
            if time.monotonic() >= next_ping and not self.stopping.is_set():
                await conn.execute(queries.PING, {"instance": self.instance_id})
                next_ping = time.monotonic() + min(PING_SEC, 1.0)

    def _wake_queue(self, channel: str, queue: str) -> None:
        """Wake the worker of the queue a NOTIFY names. Any login may NOTIFY, so the payload is only a hint:
        one that names no queue of ours in plain digits is ignored (and reported, rate-limited)."""
        event = self._wake.get(int(queue)) if queue.isascii() and queue.isdigit() and len(queue) <= 9 else None
        if event is not None:
            event.set()
        elif not (queue.isascii() and queue.isdigit()):
            self._bad_notify.hit(channel=channel, payload=queue)

    # -- workers -------------------------------------------------------------
    async def _worker(self, queue: int) -> None:
        """Drain the queue, then wait for a NOTIFY, the poll timer or shutdown; close the connection when
        idle (worker_idle_timeout_sec, conn_max_idle_time) and renew it after conn_max_lifetime. A lost
        connection (its backend terminated) is this worker's alone: it reconnects and hands back the jobs it
        had claimed but not started (the batch that was running keeps its attempt: lease recovery)."""
        conn: psycopg.AsyncConnection | None = None
        opened = idle_since = time.monotonic()
        wake = self._wake[queue]
        try:
            while not self._draining.is_set():
                if conn is not None and time.monotonic() - opened >= self._max_lifetime:
                    await conn.close()
                    conn = None
                if conn is None:
                    conn = await self._connect(f"queue{queue}")
                    opened, dirty = time.monotonic(), False
                wake.clear()
                if self._draining.is_set():  # (set while this worker connected: no claim after the stop)
                    break
                try:
                    claimed, dirty = await self._claim_and_run(conn, queue, dirty)
                except WorkerInterrupted:
                    return
                except WorkerLost as lost:
                    await conn.close()
                    conn = await self._connect(f"queue{queue}")  # fails when the database is gone: session restart
                    opened, dirty = time.monotonic(), False
                    await self._hand_back(conn, queue, lost)
                    continue
                if getattr(conn, "broker_big_notice", False):
                    await conn.close()  # its input buffer holds a job's huge notice: give the memory back
                    conn = None
                if claimed:
                    idle_since = time.monotonic()
                    continue
                if conn is not None and time.monotonic() - idle_since >= self._max_idle:
                    await conn.close()
                    conn = None
                try:
                    await asyncio.wait_for(wake.wait(), self.settings.queue_timer_sec)
                except asyncio.TimeoutError:
                    pass
        finally:
            if conn is not None:
                await conn.close()

    async def _hand_back(self, conn: psycopg.AsyncConnection, queue: int, lost: WorkerLost) -> None:
        released = await stopping.release(conn, lost.unrun)
        log.warning("worker connection lost; reconnected, %d claimed job(s) handed back", len(released),
                    extra={"database": self.db.name, "queue": queue, "error": str(lost)})

    async def _claim_and_run(self, conn: psycopg.AsyncConnection, queue: int, dirty: bool) -> tuple[bool, bool]:
        """Claim up to fetch_query_que_size (at most queue_buffer_size) jobs in one round trip and run them:
        jobs without a timeout several per transaction (broker_run_batch: each in its own subtransaction, and
        only jobs of one run_as role and tenant together, at most PER_TRANSACTION), a job with a timeout alone
        under its statement_timeout. A job whose lease ran out meanwhile and was claimed elsewhere is skipped.
        `dirty`: jobs ran on this session since its last reset. Every message that follows a transaction of
        jobs starts with the reset (in a transaction of its own, so that what follows starts from the reset
        settings), so the session is clean whenever the worker waits. Returns (claimed, dirty)."""
        started = time.perf_counter()
        params = {"queue": queue, "instance": self.instance_id, "lease": self.settings.lease_seconds,
                  "batch": self._batch}
        try:
            if dirty:
                got = await self._jobs_result(conn, queries.RESET_TRANSACTION + queries.CLAIM, params)
            else:
                got = await (await conn.execute(queries.CLAIM, params)).fetchall()
        except psycopg.errors.LockNotAvailable as exc:  # the reset before the claim waited too long
            raise WorkerLost(exc, []) from exc  # nothing after it in the message ran: nothing claimed
        except psycopg.OperationalError as exc:
            if not conn.broken:
                raise
            raise WorkerLost(exc, []) from exc  # lost while idle: nothing claimed (or the claim's leases recover)
        self._claim_seconds[queue].observe(time.perf_counter() - started)
        rows = self._buffers[queue]  # claimed, not started: the stop takes it over (and hands it back)
        rows.extend(got)
        claimed, dirty = bool(got), False
        while rows and not self._draining.is_set():  # a stop runs nothing more of what was claimed
            # alone: a job with a timeout (statement_timeout covers the whole call), an autonomous job
            alone = rows[0][6] is not None or rows[0][8]
            # (one tenant's jobs per message: broker_run_batch stops at another tenant anyway, and a lost
            # connection then hands back every job of the others)
            taken = rows[:1] if alone else rows[:next((i for i, r in enumerate(rows)
                                                       if r[6] is not None or r[8] or r[3] != rows[0][3]), len(rows))]
            batch = taken[:PER_TRANSACTION]
            del rows[:len(batch)]
            try:
                if batch[0][8]:  # outside a transaction, on a connection of its own (autonomous.py)
                    await autonomous.run(self, conn, queue, batch[0], dirty)
                else:
                    rows[:0] = batch[await self._run_batch(conn, queue, batch, dirty):]
            except psycopg.errors.LockNotAvailable as exc:  # the reset sent before the batch waited too long:
                unrun = batch + rows                          # the batch did not run, every claimed job goes back
                rows.clear()
                raise WorkerLost(exc, unrun) from exc
            except psycopg.OperationalError as exc:
                if not conn.broken:
                    raise
                if queue in self._interrupting:  # the stop ended this session and records the batch
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
                if queue in self._interrupting:
                    rows.extend(unrun)  # the stop hands them back on its own connection
                    raise WorkerInterrupted() from exc
                raise WorkerLost(exc, unrun) from exc
            stopping.log_released(self.db.name, queue, unrun, released, "stopping")
            dirty = False
        return claimed, dirty

    @staticmethod
    async def _jobs_result(conn: psycopg.AsyncConnection, sql: str, params: dict) -> list[tuple]:
        """Send several statements as one message (bound client-side) and return the rows of the result whose
        first column is job_id (the claim's, or broker_run_batch's)."""
        cur = psycopg.AsyncClientCursor(conn)
        await cur.execute(sql, params)
        while not (cur.pgresult is not None and cur.pgresult.nfields and cur.pgresult.fname(0) == b"job_id"):
            if not cur.nextset():
                raise psycopg.ProgrammingError("no job_id result in: " + sql[:60])
        return await cur.fetchall()

    async def _run_batch(self, conn: psycopg.AsyncConnection, queue: int, batch: list[tuple], dirty: bool) -> int:
        """Run claimed jobs in one transaction, sent as one message (the reset when `dirty`, BEGIN,
        broker_run_batch, COMMIT); returns how many broker_run_batch took up (>= 1). When the transaction fails
        as a whole (say a job's deferred constraint at COMMIT), its jobs run again one per transaction, so that
        one job cannot cost the others an attempt (during a stop they are handed back instead); a single job's failed transaction leaves it to lease
        recovery. The session needs a reset afterwards."""
        now = time.time()
        for job_id, name, _, tenant, *_ in batch:
            self.running[job_id] = JobView(job_id, name, queue, tenant, now)
        outcomes = None
        # array literals built here: psycopg's array dumper quotes element by element
        params = {"jobs": "{" + ",".join([str(r[0]) for r in batch]) + "}",
                  "tokens": "{" + ",".join([r[7] for r in batch]) + "}", "ms": str(batch[0][6])}
        sql = (queries.RESET_TRANSACTION if dirty else "") + (queries.RUN_TRANSACTION_TIMEOUT if batch[0][6]
                                                                else queries.RUN_TRANSACTION)
        self._executing[queue] = (conn.info.backend_pid, batch)  # what the stop interrupts at its deadline
        try:
            outcomes = await self._jobs_result(conn, sql, params)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:  # also at COMMIT, after broker_run_batch returned its outcomes
            outcomes = None
            log.warning("a transaction of %d job(s) failed: %s", len(batch),
                        cap_text((str(exc).strip().splitlines() or [""])[0]),
                        extra={"database": self.db.name, "queue": queue, "job_id": batch[0][0]})
        finally:
            self._executing.pop(queue, None)
            for row in batch:
                self.running.pop(row[0], None)
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                await conn.execute("ROLLBACK")
        if outcomes is None:
            for i, row in enumerate(batch if len(batch) > 1 else ()):
                if self._draining.is_set():  # stopping: the rest go back with the jobs not started
                    self._buffers[queue].extend(batch[i:])
                    break
                await self._run_batch(conn, queue, [row], True)
            return len(batch)
        self._record_all(queue, batch, outcomes)
        return max(len(outcomes), 1)

    def _record_all(self, queue: int, batch: list[tuple], outcomes: list[tuple]) -> None:
        """Metrics, logs and the dashboard's lists for the outcomes of a transaction of jobs."""
        done = [(row, outcome) for row, outcome in zip(batch, outcomes) if outcome[1] == 2]
        if done:
            observe_many(self._duration[queue], [outcome[5] for _, outcome in done])
            self._completed[queue].inc(len(done))
            self.finished_at.extend([time.time()] * len(done))
            if log.isEnabledFor(logging.INFO):
                for row, outcome in done:
                    log.info("job completed", extra={"database": self.db.name, "queue": queue, "job_id": row[0],
                                                     "job_name": row[1], "seconds": round(outcome[5], 6)})
        if len(done) < len(outcomes):
            for row, outcome in zip(batch, outcomes):
                if outcome[1] != 2:
                    self._record(queue, row, outcome)

    def _record(self, queue: int, row: tuple, outcome: tuple) -> None:
        """A job that did not complete: not run (lease lost, or gone), or failed (retried or for good)."""
        job_id, name, _, tenant, _, max_attempts, *_ = row
        _, status, attempts, sqlstate, message, seconds = outcome
        message = cap_text(message)  # the extension caps it too (broker._error_text); this holds for any caller
        fields = {"database": self.db.name, "queue": queue, "job_id": job_id, "job_name": name}
        if status is None:  # lease lost meanwhile (55000), or the job is gone
            log.warning("job not run: %s", message, extra=fields)
            return
        self._duration[queue].observe(seconds)
        (self.metrics.retried if status == 0 else self.metrics.failed).labels(self.db.name, str(queue)).inc()
        self.failures.appendleft({"job_id": job_id, "job_name": name, "queue": queue, "tenant": short_label(tenant),
                                  "attempt": attempts, "max_attempts": max_attempts, "sqlstate": sqlstate,
                                  "error": message, "final": status == 3, "at": time.time()})
        log.warning("job failed" + (", will retry" if status == 0 else ""),
                    extra=fields | {"sqlstate": sqlstate, "error": message, "attempt": attempts})

    # -- maintenance ---------------------------------------------------------
    async def _maintenance(self) -> None:
        next_recover = next_stats = next_release = 0.0
        async with await self._connect("maintenance") as conn:
            while not self._draining.is_set():
                now = time.monotonic()
                if now >= next_release:
                    # deferred dependency releases (large fan-ins): never on a claim's path, bounded per call, and
                    # a call never waits on a lock; again while it applies something
                    while not self._draining.is_set():
                        if not (await (await conn.execute(queries.APPLY_RELEASES)).fetchone())[0]:
                            break
                    next_release = now + min(RELEASE_POLL_SEC, self.settings.queue_timer_sec)
                if now >= next_recover:
                    recovered = await (await conn.execute(queries.RECOVER)).fetchall()
                    for job_id, status in recovered:
                        log.warning("recovered a job whose lease expired", extra={"database": self.db.name,
                                                                                  "job_id": job_id, "status": status})
                    next_recover = now + self.settings.stale_job_recovery_sec
                if now >= next_stats:
                    cur = await conn.execute(queries.QUEUE_STATS)
                    cols = [c.name for c in cur.description]
                    self.queue_stats = bounded_stats([dict(zip(cols, r)) for r in await cur.fetchall()],
                                                     self.db.queue_count)
                    self.metrics.set_depth(self.db.name, self.queue_stats)
                    cur = await conn.execute(queries.INSTANCES)
                    cols = [c.name for c in cur.description]
                    self.instances = [dict(zip(cols, r)) for r in await cur.fetchall()]
                    next_stats = now + self.settings.queue_depth_poll_sec
                try:
                    await asyncio.wait_for(self._draining.wait(),
                                           min(next_recover, next_stats, next_release) - time.monotonic())
                except asyncio.TimeoutError:
                    pass

    def _planned(self, next_fire_at) -> None:
        self.next_schedule_fire = next_fire_at

    def state(self) -> dict:
        now = time.time()
        return {"database": self.db.name, "role": self.role, "listening": self.listening,
                "instance_id": self.instance_id, "error": self.error,
                "next_schedule_fire": self.next_schedule_fire.isoformat() if self.next_schedule_fire else None,
                "running": [{"job_id": v.job_id, "job_name": v.name, "queue": v.queue, "tenant": short_label(v.tenant),
                             "age_seconds": round(now - v.started, 1)} for v in self.running.values()],
                "failures": list(self.failures), "queues": self.queue_stats, "instances": self.instances,
                "completed_per_minute": [sum(1 for t in self.finished_at if now - 60 * (m + 1) < t <= now - 60 * m)
                                         for m in range(10)]}
