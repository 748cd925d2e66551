"""One database's runner: supervision (reconnect with backoff), the instance lock (active or standby), and the
LISTEN connection that wakes the workers. Per active session: one worker per queue (run/worker.py), the
maintenance task (run/maintenance.py) and the schedule tick (run/schedules.py); the stop is run/stopping.py.
It decides nothing about jobs: broker_get says what runs, broker_run_batch runs it.
"""
from __future__ import annotations

import asyncio
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
from ..settings import BrokerSettings
from . import queries, stopping
from .connections import connect
from .login import LoginRefused, check_login
from .maintenance import maintain
from .queries import Claimed
from .schedules import tick_schedules
from .worker import QueueWorker

log = logging.getLogger("pgsql_broker")
SUPPORTED_SCHEMA = ("0.2.0",)
PING_SEC = 5.0
STOP_POLL_SEC = 0.2  # the listen loop notices a stop this often (an idle runner stops within a second)
STANDBY_RETRY_SEC = 2.0


class SchemaError(Exception):
    """The database has no pgsql_broker schema this runner can work with."""


class DatabaseRunner:
    """Serves one database: active while it holds the instance lock, standby otherwise."""

    def __init__(self, db: DatabaseConfig, settings: BrokerSettings, metrics: Metrics, stopping: asyncio.Event,
                 hurry: asyncio.Event | None = None):
        """`stopping`: stop (running jobs may finish until shutdown_timeout_sec); `hurry`: interrupt them now."""
        self.db, self.settings, self.metrics, self.stopping = db, settings, metrics, stopping
        self.hurry = hurry if hurry is not None else asyncio.Event()
        self.view = DatabaseView(db.name, db.queue_count, metrics)
        self._wake = {q: asyncio.Event() for q in range(1, db.queue_count + 1)}
        self._schedules_changed = asyncio.Event()
        self._bad_notify = RateLimitedWarning(log, "ignored malformed NOTIFY payload(s)", {"database": db.name})
        self._draining = asyncio.Event()
        # per queue: the jobs its worker claimed and has not started, and the batch it is executing (with the
        # backend pid that executes it); the stop hands back the first and interrupts the second (stopping.py)
        self._buffers: dict[int, list[Claimed]] = {q: [] for q in self._wake}
        self._executing: dict[int, tuple[int, list[Claimed]]] = {}
        self._interrupting: set[int] = set()
        self._batch = min(settings.fetch_query_que_size, settings.queue_buffer_size)
        self._max_lifetime = parse_duration(db.conn_max_lifetime)
        self._max_idle = min(parse_duration(db.conn_max_idle_time), settings.worker_idle_timeout_sec)

    @property
    def instance_id(self) -> int | None:
        return self.view.instance_id

    def state(self) -> dict:
        return self.view.snapshot()

    async def _connect(self, purpose: str) -> psycopg.AsyncConnection:
        return await connect(self.db.dsn(), f"{self.settings.name}:{purpose}", worker=purpose.startswith("queue"))

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
                self.view.error = cap_text((str(exc).strip().splitlines() or [""])[0])
                if not logged:
                    log.warning("database unavailable, retrying with backoff", extra={"database": self.db.name,
                                                                                      "error": self.view.error})
                    logged = True
            except Exception as exc:  # never let one database stop the others
                self.view.error = cap_text(f"{type(exc).__name__}: {exc}".strip().splitlines()[0])
                log.exception("unexpected error, restarting this database's session",
                              extra={"database": self.db.name})
            finally:
                self.view.instance_id = None
                self.view.set_role("disconnected", listening=False)
            if not self.stopping.is_set():
                try:
                    await asyncio.wait_for(self.stopping.wait(), delay)
                except asyncio.TimeoutError:
                    pass
                delay = min(delay * 2, self.settings.notify_retry_seconds)

    async def _session(self) -> None:
        async with await self._connect("listen") as conn:
            has_schema = (await (await conn.execute(queries.HAS_SCHEMA)).fetchone())[0]
            version = (await (await conn.execute(queries.SCHEMA_VERSION)).fetchone())[0] if has_schema else None
            if version not in SUPPORTED_SCHEMA:
                raise SchemaError(f"database {self.db.name} has pgsql_broker schema {version or 'none'}; this runner "
                                  f"needs {', '.join(SUPPORTED_SCHEMA)}: run `pgsql-broker install`")
            await check_login(conn, self.db.name, self.settings.allow_privileged_login)
            await conn.execute(queries.LISTEN)
            await conn.execute(queries.LISTEN_SCHEDULES)
            self.view.listening, self.view.error = True, None
            if not await self._become_active(conn):
                return
            log.info("active instance", extra={"database": self.db.name, "instance": self.instance_id})
            self._draining.clear()
            self._interrupting.clear()  # (a session restarted after a drain: its workers are new)
            tasks = [asyncio.create_task(QueueWorker(self, q).run()) for q in self._wake]
            tasks.append(asyncio.create_task(maintain(self)))
            tasks.append(asyncio.create_task(tick_schedules(self._connect, self.db.name, self._schedules_changed,
                                                            self._draining, self.metrics, self.view.planned)))
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
                self.view.instance_id = (await cur.fetchone())[0]
                self.view.set_role("active", listening=True)
                return True
            except errors.LockNotAvailable:
                if self.view.role != "standby":
                    log.info("another instance is active: standing by", extra={"database": self.db.name})
                self.view.set_role("standby", listening=True)
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
                if note.channel == queries.SCHEDULE_CHANNEL:
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
