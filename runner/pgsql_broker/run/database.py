"""One database's runner: supervision (reconnect with backoff), the instance lock (active or standby), and the
session connection: LISTEN, and, serialised on it, the poll, maintenance, schedules and stats
(run/maintenance.py, run/schedules.py). Per active session: workers_per_queue workers per queue (run/worker.py)
that borrow connections from the database's pool while their queue has work (run/pool.py); when the databases
of a server outnumber the session connections of the runner's share of it (run/server_share.py), they take turns
(run/rota.py: a database parks its instance between two visits); the stop is run/stopping.py. Faults (outages,
refusals, lost claims) are supervised here too: see docs/runner.md, "Faults". It decides nothing about jobs:
broker_get says what runs, broker_run_batch runs it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time

import psycopg
from psycopg import errors

from .. import __version__
from ..config import DatabaseConfig, parse_duration
from ..observe.logs import RateLimitedWarning, cap_text
from ..observe.metrics import Metrics
from ..observe.state import DatabaseView
from ..settings import BrokerSettings, parse_queue_list, parse_queue_workers
from . import queries, stopping
from .cancelling import Canceller
from .connect_errors import PermanentCounter
from .connections import connect, deadline, with_tcp_defaults
from .login import LoginRefused, check_login
from .maintenance import PING_SEC, TIMERS, poll_soon, run_timers
from .pool import RunnerBudget, WorkerPool
from .pooling import refuse_transaction_pooling
from .retention import Retention
from .rota import SessionRota
from .queries import Claimed
from .schedules import ScheduleTicker
from .worker import Lane, Workers

log = logging.getLogger("pgsql_broker")
SUPPORTED_SCHEMA = ("0.3.0",)
STOP_POLL_SEC = 0.2  # the session loop notices a stop this often (an idle runner stops within a second)
STANDBY_RETRY_SEC = 2.0
# A standby ends the backend holding the instance lock once the active instance's row has not been pinged for
# this long (five pings missed): a lock left behind, say on a pooler's server connection (run/pooling.py).
STALE_HOLDER_SEC = 5 * PING_SEC
# At the stop, how long a parked database waits for a session slot to mark its instance stopped.
STOP_PARKED_SEC = 10.0
# The first reconnect waits this long, each next one twice as long up to notify_retry_seconds; a session that
# worked starts the next outage afresh.
FIRST_RETRY_SEC = 0.5


class SchemaError(Exception):
    """The database has no pgsql_broker schema this runner can work with."""


class DatabaseRunner(Workers):
    """Serves one database: active while it holds the instance lock, standby otherwise."""

    def __init__(self, db: DatabaseConfig, settings: BrokerSettings, metrics: Metrics, stopping: asyncio.Event,
                 hurry: asyncio.Event | None = None, budget: RunnerBudget | None = None,
                 rota: SessionRota | None = None):
        """`stopping`: stop (running jobs may finish until shutdown_timeout_sec); `hurry`: interrupt them now;
        `budget`: the runner-wide count of worker connections (max_open_conns_total); `rota`: the runner's
        session slots (the databases take turns when they outnumber them)."""
        self.db, self.settings, self.metrics, self.stopping = db, settings, metrics, stopping
        self.hurry = hurry if hurry is not None else asyncio.Event()
        self.view = DatabaseView(db.name, db.queue_count, metrics)
        queues = range(1, db.queue_count + 1)
        overrides = parse_queue_workers(settings.queue_workers)
        self._workers = {q: overrides.get(q, settings.workers_per_queue) for q in queues}
        self._alone_queues = parse_queue_list(settings.one_job_per_transaction_queues)
        self._lanes = {q: Lane() for q in queues}
        self._warned_unserved: set[int] = set()
        self._warned_paused: set[tuple[int, str]] = set()  # (queue, tenant) with ready jobs, paused
        self._learned_alone: set[int] = set()  # job ids that run alone (run/worker.py)
        self._learned_single: set[int] = set()  # job ids that run in a transaction of their own (run/worker.py)
        self._lost_runs: set[int] = set()  # job ids whose session this runner lost while running them alone (worker.py)
        self._ticker = ScheduleTicker(db.name, metrics, self.view.planned)
        self._next: dict[str, float] = {}
        self._bad_notify = RateLimitedWarning(log, "ignored malformed NOTIFY payload(s)", {"database": db.name})
        self._draining = asyncio.Event()
        # per worker (queue, index): the jobs it claimed and has not started, and the batch it is executing
        # (with the backend pid that executes it); the stop hands back the first and interrupts the second
        keys = [(q, i) for q in queues for i in range(self._workers[q])]
        self._buffers: dict[tuple[int, int], list[Claimed]] = {k: [] for k in keys}
        self._executing: dict[tuple[int, int], tuple[int, list[Claimed]]] = {}
        self._executing_since: dict[tuple[int, int], float] = {}
        self._interrupting: set[tuple[int, int]] = set()
        # autonomous jobs executing: job id -> (queue, the job's own connection), for cancel requests
        self._autonomous_running: dict[int, tuple[int, psycopg.AsyncConnection]] = {}
        self._cancels = Canceller(db.name, self._executing, metrics.cancels_sent,  # cancel requests (cancelling.py)
                                  self._autonomous_running)
        self._batch = min(settings.fetch_query_que_size, settings.queue_buffer_size)
        self.pool = WorkerPool(lambda: self._connect("worker"), db.max_open_conns - 1,
                               budget if budget is not None else RunnerBudget(None),
                               max_idle=min(parse_duration(db.conn_max_idle_time), settings.worker_idle_timeout_sec),
                               max_lifetime=parse_duration(db.conn_max_lifetime), max_warm=len(keys),
                               on_connect=metrics.connect_seconds.labels(db.name).observe)
        self.view.workers = len(keys)
        self.view.connections = lambda: self.pool.connected + (1 if self.view.listening else 0)
        self._database = db.database  # current_database(), once connected
        self._evict_refused = False
        self._retention = Retention(settings, db.name)
        self._rota = rota if rota is not None else SessionRota(None, settings.parked_visit_sec)
        self._parked: int | None = None  # the instance this runner parked, resumed at the next visit
        self._park_now = False
        self._probed = False
        self._busy_workers, self._idle_since = 0, time.monotonic()
        # claimed jobs a worker had not started when its connection was lost: handed back (attempt not counted)
        # on the next connection that works, across outages and session restarts (run/worker.py)
        self._orphans: list[Claimed] = []
        self._orphans_alone: list[Claimed] = []  # run when their session died (worker.py _first_loss): to run alone
        # claims whose answer was lost with the connection: their token and the backend that may still commit them
        self._orphan_claims: list[tuple[str, int | None]] = []
        self._outage_since: float | None = None  # when the current outage began (time.monotonic())
        self._served = False  # a session of this database connected and listened once
        self._backoff = FIRST_RETRY_SEC

    def idle_since(self) -> float | None:
        """When the workers last had work (time.monotonic()); None while they have some (run/rota.py)."""
        if self._busy_workers or any(lane.pending for lane in self._lanes.values()):
            return None
        return self._idle_since

    @property
    def instance_id(self) -> int | None:
        return self.view.instance_id

    def state(self) -> dict:
        return self.view.snapshot()

    async def _connect(self, purpose: str) -> psycopg.AsyncConnection:
        conn = await connect(with_tcp_defaults(self.db.dsn(), self.settings), f"{self.settings.name}:{purpose}",
                             worker=purpose == "worker")
        conn.broker_dirty = False  # type: ignore[attr-defined]  (jobs ran on it since its last reset)
        return conn

    def _deadline(self, conn: psycopg.AsyncConnection, what: str, statements: int = 1):
        """The runner's own statements on `conn` must be answered within statement_deadline_sec each."""
        return deadline(conn, self.settings.statement_deadline_sec * statements, f"{self.db.name}: {what}")

    # -- supervision ---------------------------------------------------------
    async def run(self) -> None:
        """Keep a session to the database until shutdown; reconnect with backoff (afresh after a session that
        worked), log each outage when it begins and when it ends."""
        # authentication, a missing database, no privilege: at start-up the process exits after a few tries;
        # once the database served, a refusal is waited out (refusal_retry_sec), since it may heal by itself
        permanent = PermanentCounter(self.db.name, self.settings.refusal_retry_sec)
        while not self.stopping.is_set():
            if not await self._rota.enter(self, self.stopping):  # (at once unless the databases take turns)
                break
            try:
                await self._session()
                self._backoff = FIRST_RETRY_SEC
                permanent.reset()
            except LoginRefused:
                raise  # the process exits: no retry makes the login safe
            except (psycopg.OperationalError, SchemaError) as exc:
                if self.view.role in ("active", "standby", "parked"):
                    self._backoff = FIRST_RETRY_SEC  # (this session worked: a new outage begins)
                permanent.check(exc, self.view.role, self._served)
                self.view.error = cap_text((str(exc).strip().splitlines() or [""])[0])
                self._outage_begins()
            except Exception as exc:  # never let one database stop the others
                if self.view.role in ("active", "standby", "parked"):
                    self._backoff = FIRST_RETRY_SEC
                if not permanent.check(exc, self.view.role, self._served):  # (a permanent error is logged by check, without a traceback)
                    self.view.error = cap_text(f"{type(exc).__name__}: {exc}".strip().splitlines()[0])
                    log.exception("unexpected error, restarting this database's session",
                                  extra={"database": self.db.name})
            finally:
                self._rota.leave(self)
                self.view.instance_id = None
                self.view.set_role("parked" if self._parked is not None else "standby"
                                   if self._rota.takes_turns and self.view.role == "standby" else "disconnected",
                                   listening=False)
            if self._park_now:  # a turn, not an outage: the next visit waits in the rota only
                self._park_now = False
                continue
            if not self.stopping.is_set():
                try:
                    await asyncio.wait_for(self.stopping.wait(), self._backoff)
                except asyncio.TimeoutError:
                    pass
                self._backoff = min(self._backoff * 2, self.settings.notify_retry_seconds)
        if self._parked is not None:
            await self._stop_parked()

    def _outage_begins(self) -> None:
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            log.warning("database unavailable, retrying with backoff", extra={"database": self.db.name,
                                                                              "error": self.view.error})

    def _session_works(self) -> None:
        """The session connected and listens: an outage ends here."""
        self._served = True
        if self._outage_since is not None:
            seconds = time.monotonic() - self._outage_since
            self._outage_since = None
            log.info("database available again after %.1f s", seconds,
                     extra={"database": self.db.name, "outage_seconds": round(seconds, 1)})

    async def _stop_parked(self) -> None:
        """The runner stops while this database is parked: mark its instance stopped (any session may), so
        that status shows no parked instance of a runner that is gone."""
        parked, self._parked = self._parked, None
        try:
            if await asyncio.wait_for(self._rota.enter(self, None), STOP_PARKED_SEC):
                async with await self._connect("stop") as conn:
                    await conn.execute(queries.SHUTDOWN, {"instance": parked})
        except (psycopg.Error, OSError, asyncio.TimeoutError) as exc:
            log.warning("could not mark the parked instance stopped (the next instance to register does)",
                        extra={"database": self.db.name, "instance": parked, "error": str(exc).strip()[:200]})
        finally:
            self._rota.leave(self)
        self.view.set_role("disconnected", listening=False)

    async def _session(self) -> None:
        async with await self._connect("listen") as conn:
            with self._deadline(conn, "starting the session"):
                await self._start_session(conn)
            self.view.listening, self.view.error = True, None
            self._session_works()
            for buffer in self._buffers.values():  # (a worker of the session that ended claimed after the stop)
                self._orphans.extend(buffer)
                buffer.clear()
            # (before standing by too: a standby that took over would count their attempts at their lease)
            if self._orphans or self._orphans_alone or self._orphan_claims:
                await self._hand_back_orphans(conn)
            if not await self._become_active(conn):
                return
            if not self._rota.takes_turns:
                log.info("active instance", extra={"database": self.db.name, "instance": self.instance_id})
            self._draining.clear()
            self._interrupting.clear()  # (a session restarted after a drain: its workers are new)
            self._lanes = {q: Lane() for q in self._lanes}
            self._next = dict.fromkeys(TIMERS, 0.0)
            self._ticker.due_at = 0.0
            tasks = [asyncio.create_task(self._worker(q, i)) for q, n in self._workers.items() for i in range(n)]
            try:
                await self._listen(conn, tasks)
            finally:
                for lane in self._lanes.values():
                    lane.wake_all()  # (idle workers return; the stop waits for the busy ones)
                if not conn.broken:  # (the stop may wait for running jobs longer than the server waits for us)
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute(queries.NO_IDLE_SESSION_TIMEOUT)
                await stopping.drain(self, conn, tasks)
                await self.pool.close()
                if not conn.closed and self.instance_id is not None:
                    try:
                        if self._park_now:
                            await conn.execute(queries.PARK, {"instance": self.instance_id})
                            self._parked = self.instance_id
                        else:
                            await conn.execute(queries.SHUTDOWN, {"instance": self.instance_id})
                    except psycopg.Error:
                        self._park_now = False

    async def _start_session(self, conn: psycopg.AsyncConnection) -> None:
        """Check the schema and the login, refuse transaction pooling, LISTEN; and have the server end this
        session when the runner goes silent (a runner cut off by a stalled network holds the instance lock:
        the server ends its session after idle_session_timeout, and a standby takes over)."""
        has_schema, self._database = await (await conn.execute(queries.HAS_SCHEMA_IN)).fetchone()
        version = (await (await conn.execute(queries.SCHEMA_VERSION)).fetchone())[0] if has_schema else None
        if version not in SUPPORTED_SCHEMA:
            raise SchemaError(f"database {self.db.name} has pgsql_broker schema {version or 'none'}; this runner "
                              f"needs {', '.join(SUPPORTED_SCHEMA)}: run `pgsql-broker install`")
        await check_login(conn, self.db.name, self.settings.allow_privileged_login, warn=self._parked is None)
        if not self._probed:  # (once: the next visits of a database that takes turns go to the same place)
            # the probe is a second connection for a moment: it counts against the runner-wide budget
            await self.pool.budget.acquire()
            try:
                await refuse_transaction_pooling(conn, lambda: self._connect("probe"), self.db.name)
            finally:
                await self.pool.budget.release()
            self._probed = True
        await conn.execute(queries.IDLE_SESSION_TIMEOUT, {"ms": int(self.settings.statement_deadline_sec * 1000)})
        await conn.execute(queries.LISTEN)
        await conn.execute(queries.LISTEN_SCHEDULES)

    async def _become_active(self, conn: psycopg.AsyncConnection) -> bool:
        while not self.stopping.is_set():
            try:
                parked, self._parked = self._parked, None
                with self._deadline(conn, "registering the instance"):
                    if parked is not None and (await (await conn.execute(queries.RESUME, {"instance": parked})).fetchone())[0]:
                        self.view.instance_id = parked
                    else:
                        cur = await conn.execute(queries.REGISTER, {
                            "name": self.settings.name, "host": socket.gethostname(), "pid": os.getpid(),
                            "queues": self.db.queue_count, "version": __version__})
                        self.view.instance_id = (await cur.fetchone())[0]
                    if self._rota.takes_turns:
                        log.info("active instance, served in turns", extra={"database": self.db.name,
                                                                            "instance": self.instance_id})
                self.view.set_role("active", listening=True)
                return True
            except errors.LockNotAvailable:
                if self.view.role != "standby":
                    log.info("another instance is active: standing by", extra={"database": self.db.name})
                    self._evict_refused = False
                self.view.set_role("standby", listening=True)
                with self._deadline(conn, "looking for a stale instance lock"):
                    await self._evict_stale_holder(conn)
                if self._rota.takes_turns:
                    return False  # (the slot goes to the next database; this one tries again at its next turn)
                async for _ in conn.notifies(timeout=STANDBY_RETRY_SEC):  # keep the socket serviced
                    pass
        return False

    async def _evict_stale_holder(self, conn: psycopg.AsyncConnection) -> None:
        """End the backend holding the instance lock when its instance stopped pinging long ago (the next
        registration then succeeds). PostgreSQL lets a login end only its own role's backends: a holder of
        another role is logged once and left to the operator."""
        try:
            cur = await conn.execute(queries.EVICT_STALE_HOLDER, {"stale": f"{STALE_HOLDER_SEC} seconds"})
            row = await cur.fetchone()
        except errors.InsufficientPrivilege as exc:
            if not self._evict_refused:
                self._evict_refused = True
                log.warning("the instance lock is held by a backend that stopped pinging, which this login may not "
                            "end: terminate it as its role or a superuser", extra={
                                "database": self.db.name, "error": (str(exc).strip().splitlines() or [""])[0]})
            return
        if row is not None:
            log.warning("ended the backend holding the instance lock: its instance stopped pinging",
                        extra={"database": self.db.name, "holder_pid": row[0]})

    async def _listen(self, conn: psycopg.AsyncConnection, tasks: list[asyncio.Task]) -> None:
        """Dispatch wake-ups and run the session's timers; return on shutdown, raise when the connection is
        lost (or a worker failed: the session restarts)."""
        prefix = f"{self._database}/"  # (a pooler alias may name it otherwise)
        while not self.stopping.is_set():
            if any(t.done() and not t.cancelled() and t.exception() for t in tasks):
                raise next(t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception())
            await run_timers(self, conn, time.monotonic())
            if self._rota.should_park(self, time.monotonic()):
                self._park_now = True
                return
            wait = min([self._ticker.due_at, *self._next.values()]) - time.monotonic()
            async for note in conn.notifies(timeout=max(0.0, min(wait, STOP_POLL_SEC))):
                if note.channel == queries.SCHEDULE_CHANNEL:
                    self._ticker.changed()
                elif note.payload == prefix + queries.DUE_HINT:
                    poll_soon(self, time.monotonic())
                    break  # (the poll runs with the timers)
                elif note.payload.startswith(prefix) and not self._cancels.hint(note.payload[len(prefix):]):
                    self._wake_queue(note.channel, note.payload[len(prefix):])
                if self.stopping.is_set():
                    break
            if not self.stopping.is_set():
                with self._deadline(conn, "cancel requests"):
                    await self._cancels.apply(conn)

    def _wake_queue(self, channel: str, queue: str) -> None:
        """Wake the worker of the queue a NOTIFY names. Any login may NOTIFY, so the payload is only a hint:
        one that names no queue of ours in plain digits is ignored (and reported, rate-limited)."""
        lane = self._lanes.get(int(queue)) if queue.isascii() and queue.isdigit() and len(queue) <= 9 else None
        if lane is not None:
            lane.wake_one()
        elif not (queue.isascii() and queue.isdigit()):
            self._bad_notify.hit(channel=channel, payload=queue)
