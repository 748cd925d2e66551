"""The runner engine: per database one session connection (LISTEN, the instance lock, and, serialised on
it, the poll, maintenance, schedules and stats), and workers that borrow connections from the database's
pool while their queue has work (workers.py, conns.py). It decides nothing about jobs: broker_get says what
runs, broker_run_batch runs it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque

import psycopg
from psycopg import errors

from . import __version__, queries, stopping
from .config import DatabaseConfig, parse_duration
from .conns import RunnerBudget, WorkerPool
from .login import LoginRefused, check_login
from .logs import RateLimitedWarning, cap_text, short_label
from .metrics import Metrics, bounded_stats
from .scheduler import ScheduleTicker
from .settings import BrokerSettings, parse_queue_list, parse_queue_workers
from .workers import JobView, Lane, Workers, WorkerInterrupted, WorkerLost  # noqa: F401 (re-exported)

log = logging.getLogger("pgsql_broker")
SUPPORTED_SCHEMA = ("0.2.0",)
# The ping only refreshes last_ping_at for status displays: the instance lock (a session advisory lock) is what
# makes an instance active, so an idle runner need not write more often.
PING_SEC = 30.0
STOP_POLL_SEC = 0.2  # the session loop notices a stop this often (an idle runner stops within a second)
STANDBY_RETRY_SEC = 2.0
# Deferred dependency releases: how often the session looks for them (at most queue_timer_sec).
RELEASE_POLL_SEC = 1.0
# A transaction of several jobs still running after this long: the session asks which of them executes.
ACTIVITY_AFTER_SEC = 1.0


class SchemaError(Exception):
    """The database has no pgsql_broker schema this runner can work with."""


BIG_NOTICE_CHARS = 1_000_000  # a worker connection that received a longer notice is closed after its jobs


class DatabaseRunner(Workers):
    """Serves one database: active while it holds the instance lock, standby otherwise."""

    def __init__(self, db: DatabaseConfig, settings: BrokerSettings, metrics: Metrics, stopping: asyncio.Event,
                 hurry: asyncio.Event | None = None, budget: RunnerBudget | None = None):
        """`stopping`: stop (running jobs may finish until shutdown_timeout_sec); `hurry`: interrupt them now;
        `budget`: the runner-wide count of worker connections (max_open_conns_total)."""
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
        self.unserved: list[int] = []  # queue numbers with ready jobs beyond queue_count
        self._warned_unserved: set[int] = set()
        queues = range(1, db.queue_count + 1)
        overrides = parse_queue_workers(settings.queue_workers)
        self._workers = {q: overrides.get(q, settings.workers_per_queue) for q in queues}
        self._alone_queues = parse_queue_list(settings.one_job_per_transaction_queues)
        self._lanes = {q: Lane() for q in queues}
        self._bad_notify = RateLimitedWarning(log, "ignored malformed NOTIFY payload(s)", {"database": db.name})
        self.next_schedule_fire = None
        self._ticker = ScheduleTicker(db.name, metrics, self._planned)
        self._next: dict[str, float] = {}
        self._draining = asyncio.Event()
        # per worker (queue, index): the jobs it claimed and has not started, and the batch it is executing
        # (with the backend pid that executes it); the stop hands back the first and interrupts the second
        keys = [(q, i) for q in queues for i in range(self._workers[q])]
        self._buffers: dict[tuple[int, int], list[tuple]] = {k: [] for k in keys}
        self._executing: dict[tuple[int, int], tuple[int, list[tuple]]] = {}
        self._executing_since: dict[tuple[int, int], float] = {}
        self._interrupting: set[tuple[int, int]] = set()
        self._batch = min(settings.fetch_query_que_size, settings.queue_buffer_size)
        self.pool = WorkerPool(lambda: self._connect("worker"), db.max_open_conns - 1,
                               budget if budget is not None else RunnerBudget(None),
                               max_idle=min(parse_duration(db.conn_max_idle_time), settings.worker_idle_timeout_sec),
                               max_lifetime=parse_duration(db.conn_max_lifetime), max_warm=db.max_idle_conns,
                               on_connect=metrics.connect_seconds.labels(db.name).observe)
        # per-job hot path: the metric children of each queue, looked up once
        self._duration = {q: metrics.duration.labels(db.name, str(q)) for q in queues}
        self._completed = {q: metrics.completed.labels(db.name, str(q)) for q in queues}
        self._claim_seconds = {q: metrics.claim_seconds.labels(db.name, str(q)) for q in queues}

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
        if purpose == "worker":
            conn.broker_dirty = False  # type: ignore[attr-defined]  (jobs ran on it since its last reset)
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
            self._lanes = {q: Lane() for q in self._lanes}
            self._next = dict.fromkeys(("poll", "release", "recover", "stats", "activity", "ping"), 0.0)
            self._ticker.due_at = 0.0
            tasks = [asyncio.create_task(self._worker(q, i)) for q, n in self._workers.items() for i in range(n)]
            try:
                await self._listen(conn, tasks)
            finally:
                for lane in self._lanes.values():
                    lane.wake_all()  # (idle workers return; the stop waits for the busy ones)
                await stopping.drain(self, conn, tasks)
                await self.pool.close()
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
        """Dispatch wake-ups and run the session's timers; return on shutdown, raise when the connection is
        lost (or a worker failed: the session restarts)."""
        prefix = f"{conn.info.dbname}/"
        while not self.stopping.is_set():
            if any(t.done() and not t.cancelled() and t.exception() for t in tasks):
                raise next(t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception())
            await self._timers(conn, time.monotonic())
            wait = min([self._ticker.due_at, *self._next.values()]) - time.monotonic()
            async for note in conn.notifies(timeout=max(0.0, min(wait, STOP_POLL_SEC))):
                if note.channel == "pgsql_broker_schedule":
                    self._ticker.changed()
                elif note.payload.startswith(prefix):
                    self._wake_queue(note.channel, note.payload[len(prefix):])
                if self.stopping.is_set():
                    break

    def _wake_queue(self, channel: str, queue: str) -> None:
        """Wake the worker of the queue a NOTIFY names. Any login may NOTIFY, so the payload is only a hint:
        one that names no queue of ours in plain digits is ignored (and reported, rate-limited)."""
        lane = self._lanes.get(int(queue)) if queue.isascii() and queue.isdigit() and len(queue) <= 9 else None
        if lane is not None:
            lane.wake_one()
        elif not (queue.isascii() and queue.isdigit()):
            self._bad_notify.hit(channel=channel, payload=queue)

    # -- the session's timers ----------------------------------------------
    async def _timers(self, conn: psycopg.AsyncConnection, now: float) -> None:
        """Whatever is due, serialised on the session connection: the schedule tick, the poll, deferred
        dependency releases, lease recovery, the stats, the ping. Idle, each is one cheap statement now and
        then; none opens a connection."""
        t = self._next
        await self._release_overdue(conn, now)
        if now >= self._ticker.due_at:
            await self._ticker.tick(conn)
        if now >= t["poll"]:
            await self._poll(conn)
            t["poll"] = now + self.settings.queue_timer_sec
        if now >= t["release"]:
            # deferred dependency releases (large fan-ins): never on a claim's path, bounded per call, and
            # a call never waits on a lock; again while it applies something
            while not self._draining.is_set():
                if not (await (await conn.execute(queries.APPLY_RELEASES)).fetchone())[0]:
                    break
            t["release"] = now + min(RELEASE_POLL_SEC, self.settings.queue_timer_sec)
        if now >= t["recover"]:
            for job_id, status in await (await conn.execute(queries.RECOVER)).fetchall():
                log.warning("recovered a job whose lease expired", extra={"database": self.db.name,
                                                                          "job_id": job_id, "status": status})
            t["recover"] = now + self.settings.stale_job_recovery_sec
        if now >= t["stats"]:
            cur = await conn.execute(queries.QUEUE_STATS)
            cols = [c.name for c in cur.description]
            self.queue_stats = bounded_stats([dict(zip(cols, r)) for r in await cur.fetchall()], self.db.queue_count)
            self.metrics.set_depth(self.db.name, self.queue_stats)
            cur = await conn.execute(queries.INSTANCES)
            cols = [c.name for c in cur.description]
            self.instances = [dict(zip(cols, r)) for r in await cur.fetchall()]
            t["stats"] = now + self.settings.queue_depth_poll_sec
        wall = time.time()  # (JobView.started is wall-clock time, for the dashboard)
        if now >= t["activity"] and any(wall - v.started >= ACTIVITY_AFTER_SEC for v in self.running.values()
                                        if v.activity == "waiting"):
            # a transaction of several jobs that runs long: which of its jobs executes, which waits
            executing = {r[0] for r in await (await conn.execute(queries.JOB_ACTIVITY)).fetchall()
                         if r[5] == "executing"}
            for view in list(self.running.values()):
                if view.activity in ("waiting", "executing") and view.job_id in executing:
                    view.activity = "executing"
            t["activity"] = now + ACTIVITY_AFTER_SEC
        if now >= t["ping"]:
            await conn.execute(queries.PING, {"instance": self.instance_id})
            t["ping"] = now + PING_SEC
        self.pool.reap()

    async def _release_overdue(self, conn: psycopg.AsyncConnection, now: float) -> None:
        """A worker's transaction that runs past twice the batch budget (a job caught the budget's cancel
        itself): hand back, on the session connection, what else that worker claimed, so that other workers
        take it up (only the jobs of that transaction wait for it)."""
        overdue = 2 * self.settings.batch_budget_ms / 1000
        for key, since in list(self._executing_since.items()):
            rows = self._buffers[key]
            if rows and now - since >= overdue and key not in self._interrupting:
                unrun = rows[:]
                rows.clear()
                released = await stopping.release(conn, unrun)
                stopping.log_released(self.db.name, key[0], unrun, released,
                                      "its worker's transaction runs past the batch budget")

    async def _poll(self, conn: psycopg.AsyncConnection) -> None:
        """Which queues have a job claimable now: wake one worker of each of ours; report the others once."""
        ready = (await (await conn.execute(queries.READY_QUEUES)).fetchone())[0] or []
        unserved = [q for q in ready if q > self.db.queue_count]
        for q in ready:
            if q <= self.db.queue_count:
                self._lanes[q].wake_one()
        for q in set(unserved) - self._warned_unserved:
            log.warning("jobs wait in a queue number this runner does not serve (queue_count %d): nothing runs "
                        "them until a runner serves it", self.db.queue_count,
                        extra={"database": self.db.name, "queue": q})
        self._warned_unserved.update(unserved)
        self.unserved = unserved
        self.metrics.set_unserved(self.db.name, unserved)

    def _planned(self, next_fire_at) -> None:
        self.next_schedule_fire = next_fire_at

    def state(self) -> dict:
        now = time.time()
        return {"database": self.db.name, "role": self.role, "listening": self.listening,
                "instance_id": self.instance_id, "error": self.error, "unserved_queues": self.unserved,
                "workers": sum(self._workers.values()), "connections": self.pool.open + (1 if self.listening else 0),
                "next_schedule_fire": self.next_schedule_fire.isoformat() if self.next_schedule_fire else None,
                "running": [{"job_id": v.job_id, "job_name": v.name, "queue": v.queue, "tenant": short_label(v.tenant),
                             "age_seconds": round(now - v.started, 1), "activity": v.activity}
                            for v in self.running.values()],
                "failures": list(self.failures), "queues": self.queue_stats, "instances": self.instances,
                "completed_per_minute": [sum(1 for t in self.finished_at if now - 60 * (m + 1) < t <= now - 60 * m)
                                         for m in range(10)]}
