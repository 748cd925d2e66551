"""The task worker: handlers by task name, claims while it has free slots, LISTEN with polling as a fallback, and a
graceful stop (tasks not started are never claimed; running ones get a deadline, then are handed back)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from ..config import connection_strings
from . import queries
from .context import Task
from .metrics import TaskMetrics
from .running import Handler, TaskRun

log = logging.getLogger("pgsql_broker")

MAX_RECONNECT_SECONDS = 30.0


@dataclass
class _Registered:
    handler: Handler
    concurrency: int | None   # None: shares the worker's slots with the other uncapped names


class Worker:
    """Claims and runs tasks of the names it has handlers for (`@worker.task(name)`).

    dsn: libpq connection string (default: $PGBROKER_DSN, else libpq's own PG* environment); its login must be a
    member of broker_worker. tenant: the tenant it serves (default: broker.tenant_id as the DSN sets it, else
    'default'). concurrency: tasks run at once over all names; a name's own `concurrency` caps it further.
    lease_seconds: the lease of a claim, renewed every third of it while the handler runs. poll_seconds: how
    often it claims without a NOTIFY. shutdown_seconds: how long stop() lets running handlers finish before
    their tasks are handed back (not counted as attempts). metrics_port: serve /metrics on 127.0.0.1 there."""

    def __init__(self, dsn: str | None = None, *, tenant: str | None = None, concurrency: int = 10,
                 lease_seconds: int = 60, poll_seconds: float = 5.0, shutdown_seconds: float = 30.0,
                 metrics_port: int | None = None, application_name: str = "pgsql-broker-worker"):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 3 <= lease_seconds <= 3600:
            raise ValueError("lease_seconds must be 3 to 3600")
        self.dsn = dsn
        self.tenant = tenant
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.shutdown_seconds = shutdown_seconds
        self.metrics_port = metrics_port
        self.application_name = application_name
        self.metrics = TaskMetrics()
        self._handlers: dict[str, _Registered] = {}
        self._running: dict[asyncio.Task, TaskRun] = {}
        self._idle: list[psycopg.AsyncConnection] = []
        self._control: psycopg.AsyncConnection | None = None
        self._control_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = False
        self._database = ""

    def task(self, name: str, *, concurrency: int | None = None):
        """Register `async def handler(args, ctx)` for task `name`; what it returns is the task's output (JSON)."""
        if not name or not name.strip() or len(name) > 200:
            raise ValueError("a task name is 1 to 200 characters and not blank")
        if concurrency is not None and concurrency < 1:
            raise ValueError("a task's concurrency must be at least 1")

        def register(handler: Handler) -> Handler:
            if not asyncio.iscoroutinefunction(handler):
                raise TypeError(f"the handler of {name!r} must be an async def")
            self._handlers[name] = _Registered(handler, concurrency)
            return handler
        return register

    @property
    def task_names(self) -> list[str]:
        return sorted(self._handlers)

    def stop(self) -> None:
        """Stop claiming; running handlers get shutdown_seconds to finish (run() returns then)."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """Serve until stop(). Connections that fail are opened again (with a growing pause)."""
        if not self._handlers:
            raise ValueError("no task handlers: register some with @worker.task(name)")
        server = self.metrics.serve(self.metrics_port) if self.metrics_port is not None else None
        listener = asyncio.create_task(self._listen())
        pause = 0.5
        try:
            while not self._stopping:
                try:
                    await self._serve()
                    pause = 0.5
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    if self._stopping:
                        break
                    log.warning("task worker lost its database connection: %s; again in %.1f s", exc, pause)
                    await self._close_control()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), pause)
                    pause = min(pause * 2, MAX_RECONNECT_SECONDS)
        finally:
            listener.cancel()
            await self._drain()
            await self._close_control()
            for conn in self._idle:
                await conn.close()
            self._idle.clear()
            if server is not None:
                server.shutdown()

    # -- connections ------------------------------------------------------------------------------------------

    def _conninfo(self) -> str:
        return self.dsn if self.dsn is not None else connection_strings((), os.environ)[0][0]

    async def _connect(self, autocommit: bool) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self._conninfo(), autocommit=autocommit,
                                                     application_name=self.application_name)
        conn.prepare_threshold = None
        if self.tenant is not None:
            await conn.execute(queries.SET_TENANT, {"tenant": self.tenant})
            if not autocommit:
                await conn.commit()
        return conn

    async def _control_conn(self) -> psycopg.AsyncConnection:
        if self._control is None or self._control.closed:
            self._control = await self._connect(autocommit=True)
            self._database = (await (await self._control.execute(queries.DATABASE)).fetchone())[0]
        return self._control

    async def _close_control(self) -> None:
        if self._control is not None:
            with contextlib.suppress(psycopg.Error):
                await self._control.close()
            self._control = None

    async def _task_conn(self) -> psycopg.AsyncConnection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await self._connect(autocommit=False)

    async def _give_back(self, conn: psycopg.AsyncConnection) -> None:
        if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
        else:
            self._idle.append(conn)

    async def _extend(self, task: Task) -> str:
        async with self._control_lock:
            conn = await self._control_conn()
            cur = await conn.execute(queries.EXTEND, {"job_id": task.job_id, "token": task.lease_token,
                                                      "lease": self.lease_seconds})
            return (await cur.fetchone())[0]

    async def _listen(self) -> None:
        """Wake the claim loop on a NOTIFY for this database; reconnects quietly (polling covers the gap)."""
        while True:
            try:
                conn = await self._connect(autocommit=True)
                try:
                    await conn.execute(queries.LISTEN)
                    async for note in conn.notifies():
                        if note.payload.startswith(self._database + "/"):
                            self._wake.set()
                finally:
                    await conn.close()
            except psycopg.Error:
                await asyncio.sleep(self.poll_seconds)

    # -- claiming and running ---------------------------------------------------------------------------------

    async def _serve(self) -> None:
        await self._control_conn()
        while not self._stopping:
            self._wake.clear()
            claimed = await self._claim()
            if claimed and self._free() > 0:
                continue   # there may be more
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_seconds)

    def _free(self) -> int:
        return self.concurrency - len(self._running)

    def _running_of(self, name: str) -> int:
        return sum(1 for run in self._running.values() if run.task.task == name)

    async def _claim(self) -> int:
        """One claim for the names without a cap of their own (up to the free slots), one per capped name."""
        groups: list[tuple[list[str], int]] = []
        shared = [name for name, reg in self._handlers.items() if reg.concurrency is None]
        if shared:
            groups.append((shared, self._free()))
        for name, reg in self._handlers.items():
            if reg.concurrency is not None:
                groups.append(([name], min(reg.concurrency - self._running_of(name), self._free())))
        claimed = 0
        for names, limit in groups:
            limit = min(limit, self._free())
            if limit <= 0:
                continue
            async with self._control_lock:
                conn = await self._control_conn()
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(queries.CLAIM, {"tasks": names, "limit": limit, "lease": self.lease_seconds})
                rows = await cur.fetchall()
            for row in rows:
                self._start(Task(**row))
            claimed += len(rows)
        return claimed

    def _start(self, task: Task) -> None:
        holder: dict = {}

        async def go() -> None:
            started = time.monotonic()
            conn = None
            outcome = "lost"
            try:
                conn = await self._task_conn()
                run = TaskRun(task, conn, self._handlers[task.task].handler, self._extend, self.lease_seconds)
                holder["run"] = run
                self._running[me] = run
                if self._stopping:   # claimed as the stop came: back at once, not counted
                    run.stop("shutdown")
                self.metrics.started(task.task)
                outcome = await run.run()
            except psycopg.Error as exc:
                log.warning("task not run: %s (its lease will be recovered)", exc,
                            extra={"job_id": task.job_id, "task": task.task})
            finally:
                self._running.pop(me, None)
                self.metrics.ended(task.task, outcome, time.monotonic() - started)
                if conn is not None:
                    await self._give_back(conn)
                self._wake.set()

        me = asyncio.create_task(go())
        self._running[me] = TaskRun(task, None, None, self._extend, self.lease_seconds)  # (placeholder until it starts)

    async def _drain(self) -> None:
        """At stop: let running handlers finish within shutdown_seconds, then hand the rest back."""
        if not self._running:
            return
        log.info("task worker stopping: %d task(s) running, %.0f s to finish", len(self._running), self.shutdown_seconds)
        done, pending = await asyncio.wait(list(self._running), timeout=self.shutdown_seconds)
        for task in pending:
            run = self._running.get(task)
            if run is not None:
                run.stop("shutdown")
        if pending:
            await asyncio.wait(pending)
