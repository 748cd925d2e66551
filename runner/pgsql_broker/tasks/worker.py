"""The task worker: handlers by task name; claims ahead of its free slots (at most `prefetch` tasks wait, their
leases kept), so that a claim serves many tasks and a slot that frees starts the next task at once; LISTEN with
polling as a fallback; a graceful stop (tasks not started are handed back at once; running ones get a deadline,
then are handed back too, not counted as attempts)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.rows import dict_row

from . import queries
from ..observe import tracing
from ..logins import privileged_roles
from ..observe.logs import cap_text, safe_text
from .completer import Completer
from .connections import Connections
from .context import Task
from .metrics import TaskMetrics
from .running import Handler, TaskRun

log = logging.getLogger("pgsql_broker")

MAX_RECONNECT_SECONDS = 30.0


# What an enqueuer chose of a claimed task that Python may be unable to hold: PostgreSQL keeps JSON nested thousands
# deep and integers of thousands of digits (json: RecursionError, ValueError) and intervals of millions of years
# (timedelta: DataError). Loaded with the rest of the claim, one such task would raise out of the claim and stop
# the worker (and with it a runner that runs it in its process, for every tenant), and its lease would bring it
# back to crash the next one; decoded one task at a time, it fails alone.
_DECODED_PER_TASK = {"args": "jsonb", "timeout": "interval"}


class _Undecoded(Loader):
    """A column's text as the server sent it (bytes), for _decode."""

    def load(self, data) -> bytes:
        return bytes(data)


class _Unreadable(Exception):
    """A claimed task whose arguments or timeout this worker cannot decode; the message says which and why."""


def _decode(row: dict, loaders: dict) -> Task:
    """The Task of a claimed row whose args and timeout are still undecoded (_Undecoded), decoded with the
    connection's own loaders."""
    fields = dict(row)
    for column, type_name in _DECODED_PER_TASK.items():
        data = fields[column]
        if data is None:
            continue
        try:
            fields[column] = loaders[type_name].load(data)
        except Exception as exc:  # (whatever the loader raises, it is about this task's own content)
            detail = cap_text(f"{type(exc).__name__}: {exc}", 300)
            raise _Unreadable(f"the task's {column} ({type_name}, {len(data)} bytes) cannot be read by this "
                              f"worker: {detail}") from None
    return Task(**fields)


@dataclass
class _Registered:
    handler: Handler
    concurrency: int | None   # None: shares the worker's slots with the other uncapped names


class Worker:
    """Claims and runs tasks of the names it has handlers for (`@worker.task(name)`).

    dsn: libpq connection string (default: $PGBROKER_DSN, else libpq's own PG* environment); its login must be a
    member of broker_worker. tenant: the tenant it serves (default: broker.tenant_id as the DSN sets it, else
    'default'). concurrency: tasks run at once over all names (a handler holds a connection only once it uses
    ctx.conn); a name's own `concurrency` caps it further.
    prefetch: tasks claimed ahead of free slots (default: concurrency). lease_seconds: the lease of a claim,
    renewed every third of it while a task runs or waits. poll_seconds: how often it claims without a NOTIFY.
    shutdown_seconds: how long stop() lets running handlers finish before their tasks are handed back.
    metrics_port: serve /metrics on 127.0.0.1 there. tracer_provider: an OpenTelemetry TracerProvider (the extra
    `otel`; the application's, or opentelemetry.trace.get_tracer_provider()): a span per attempt, the child of the
    enqueuer's trace context and current while the handler runs (observe/tracing.py)."""

    def __init__(self, dsn: str | None = None, *, tenant: str | None = None, concurrency: int = 32,
                 prefetch: int | None = None, lease_seconds: int = 60, poll_seconds: float = 5.0,
                 shutdown_seconds: float = 30.0, metrics_port: int | None = None,
                 application_name: str = "pgsql-broker-worker", tracer_provider=None):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        if not 3 <= lease_seconds <= 3600:
            raise ValueError("lease_seconds must be 3 to 3600")
        self.dsn = dsn
        self.tenant = tenant
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.shutdown_seconds = shutdown_seconds
        self.metrics_port = metrics_port
        self.application_name = application_name
        self.metrics = TaskMetrics()
        self._tracer = tracing.AttemptTracer(tracer_provider) if tracer_provider is not None else None
        self._handlers: dict[str, _Registered] = {}
        self._running: dict[asyncio.Task, Task] = {}     # started, by the asyncio task running each
        self._runs: dict[asyncio.Task, TaskRun] = {}     # (and its run, for the stop)
        self._waiting: deque[tuple[Task, float]] = deque()   # claimed, not started: (task, when its lease was renewed)
        self._wake = asyncio.Event()
        # the last claim took less than it asked of every name: none is ready until a NOTIFY says so (or the poll
        # comes, for tasks that come due), so a task's end does not start a claim of its own
        self._drained = False
        self._stopping = False
        self._announced = False
        self._conns: Connections | None = None
        self._completer: Completer | None = None

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
        self._conns = Connections(self.dsn, self.tenant, self.application_name)
        self._completer = Completer(lambda: self._conns.connect(autocommit=True, relaxed_commit=True))
        server = self.metrics.serve(self.metrics_port) if self.metrics_port is not None else None
        helpers = [asyncio.create_task(self._listen()), asyncio.create_task(self._keep_waiting_leases())]
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
                    await self._conns.close_control()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), pause)
                    pause = min(pause * 2, MAX_RECONNECT_SECONDS)
        finally:
            for helper in helpers:
                helper.cancel()
            await self._hand_back_waiting()
            await self._drain()
            await self._completer.close()
            await self._conns.close()
            if server is not None:
                server.shutdown()

    # -- claiming ---------------------------------------------------------------------------------------------

    def _ahead(self) -> int:
        return self.concurrency if self.prefetch is None else self.prefetch

    def _room(self) -> int:
        """How many tasks a claim may take now: free slots and the prefetch, less the tasks waiting."""
        return self.concurrency + self._ahead() - len(self._running) - len(self._waiting)

    def _running_of(self, name: str) -> int:
        return sum(1 for task in self._running.values() if task.task == name)

    def _count(self, name: str) -> int:
        return self._running_of(name) + sum(1 for task, _ in self._waiting if task.task == name)

    def _refill(self) -> int:
        """The room a claim waits for while tasks wait for slots: half of all there can be (a claim serves many
        tasks, not one as each ends)."""
        return max(1, (self.concurrency + self._ahead()) // 2)

    async def _serve(self) -> None:
        await self._conns.control()
        if not self._announced:   # once: a worker of the wrong tenant or database claims nothing, and says so only here
            self._announced = True
            log.info("task worker ready", extra={"database": self._conns.database, "tenant": self._conns.serving,
                                                 "tasks": ",".join(self.task_names), "concurrency": self.concurrency})
            await self._warn_if_privileged()
        while not self._stopping:
            self._wake.clear()
            claimed = await self._claim() if self._room() >= self._refill() or not self._waiting else 0
            self._start_waiting()
            if claimed and self._room() >= self._refill() and not self._drained:
                continue   # there may be more
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_seconds)

    async def _warn_if_privileged(self) -> None:
        """A login that is or can become a role beyond its grants (the runner's check, logins.py) works, but
        every handler's ctx.conn has its rights: say so once, as the runner does with allow_privileged_login."""
        async with self._conns.lock:
            conn = await self._conns.control()
            roles = await privileged_roles(conn)
        if roles:
            log.warning("UNSAFE: the task worker's login %s of database %s is or can become %s; handlers write in "
                        "ctx.conn with its rights: run the worker as a login that is only a member of broker_worker",
                        conn.info.user, self._conns.database, roles, extra={"database": self._conns.database})

    async def _claim(self) -> int:
        """One claim for the names without a cap of their own, one per capped name (up to twice its cap)."""
        groups: list[tuple[list[str], int]] = []
        shared = [name for name, reg in self._handlers.items() if reg.concurrency is None]
        if shared:
            groups.append((shared, self._room()))
        for name, reg in self._handlers.items():
            if reg.concurrency is not None:
                groups.append(([name], 2 * reg.concurrency - self._count(name)))
        claimed = 0
        drained = True   # (a name not asked this time, at its cap, may have more)
        for names, limit in groups:
            limit = min(limit, self._room())
            if limit <= 0:
                drained = False
                continue
            async with self._conns.lock:
                conn = await self._conns.control()
                cur = conn.cursor(row_factory=dict_row)
                # the enqueuer's arguments and timeout as text here, decoded task by task below
                for type_name in _DECODED_PER_TASK.values():
                    cur.adapters.register_loader(type_name, _Undecoded)
                await cur.execute(queries.CLAIM, {"tasks": names, "limit": limit, "lease": self.lease_seconds})
                rows = await cur.fetchall()
                loaders = {type_name: conn.adapters.get_loader(conn.adapters.types[type_name].oid, Format.TEXT)(
                               conn.adapters.types[type_name].oid, conn) for type_name in _DECODED_PER_TASK.values()}
            now = time.monotonic()
            for row in rows:
                try:
                    task = _decode(row, loaders)
                except _Unreadable as exc:
                    await self._fail_unreadable(row, str(exc))
                    continue
                self._waiting.append((task, now))
                claimed += 1
            drained = drained and len(rows) < limit
        self._drained = drained
        return claimed

    async def _fail_unreadable(self, row: dict, reason: str) -> None:
        """End a claimed task this worker cannot decode: failed for good (another attempt would read the same), so
        that it neither stops the worker nor comes back to it."""
        log.warning("task failed without running: %s", safe_text(reason), extra={"job_id": row["job_id"], "task": row["task"]})
        await self._conns.control_call(queries.FAIL, {"job_id": row["job_id"], "token": row["lease_token"],
                                                      "error": reason, "retry": False})

    def _start_waiting(self) -> None:
        """Start the waiting tasks the free slots allow, in claim order (a name at its cap waits)."""
        held: list[tuple[Task, float]] = []
        while self._waiting and len(self._running) < self.concurrency:
            task, renewed = self._waiting.popleft()
            cap = self._handlers[task.task].concurrency
            if cap is not None and self._running_of(task.task) >= cap:
                held.append((task, renewed))
                continue
            self._start(task)
        self._waiting.extendleft(reversed(held))

    async def _keep_waiting_leases(self) -> None:
        """Renew the leases of tasks waiting for a slot (a running task's own heartbeat renews its lease)."""
        while True:
            await asyncio.sleep(max(1.0, self.lease_seconds / 3))
            due = time.monotonic() - self.lease_seconds / 3
            stale = [entry for entry in self._waiting if entry[1] <= due]
            if not stale:
                continue
            try:
                rows = await self._conns.control_rows(queries.EXTEND_MANY, {
                    "job_ids": [task.job_id for task, _ in stale], "tokens": [task.lease_token for task, _ in stale],
                    "lease": self.lease_seconds})
            except psycopg.Error as error:
                log.warning("could not renew the leases of tasks waiting for a slot (tried again): %s", error)
                continue
            renewed_at = time.monotonic()
            states = {job_id: state for job_id, state in rows}
            for entry in stale:
                task, state = entry[0], states.get(entry[0].job_id)
                if entry not in self._waiting:
                    continue   # started meanwhile
                index = self._waiting.index(entry)
                if state == queries.EXTENDED:
                    self._waiting[index] = (task, renewed_at)
                else:   # lost: someone else's now; cancelled: it ends cancelled without running
                    del self._waiting[index]
                    if state == queries.CANCELLED:
                        with contextlib.suppress(psycopg.Error):
                            await self._conns.control_call(queries.FAIL, {"job_id": task.job_id, "token": task.lease_token,
                                                                          "error": "cancelled before it started", "retry": True})

    async def _hand_back_waiting(self) -> None:
        while self._waiting:
            task, _ = self._waiting.popleft()
            with contextlib.suppress(psycopg.Error):
                await self._conns.control_call(queries.RELEASE, {"job_id": task.job_id, "token": task.lease_token})

    async def _listen(self) -> None:
        """Wake the claim loop on a NOTIFY for this database; reconnects quietly (polling covers the gap)."""
        while True:
            try:
                conn = await self._conns.connect(autocommit=True)
                try:
                    await conn.execute(queries.LISTEN)
                    async for note in conn.notifies():
                        if note.payload.startswith(self._conns.database + "/"):
                            self._drained = False
                            self._wake.set()
                finally:
                    await conn.close()
            except psycopg.Error:
                await asyncio.sleep(self.poll_seconds)

    # -- running ----------------------------------------------------------------------------------------------

    def _start(self, task: Task) -> None:
        async def go() -> None:
            started = time.monotonic()
            run = TaskRun(task, self._handlers[task.task].handler, self.lease_seconds, self._conns.task_conn,
                          self._conns.control_call, self._completer.complete)
            self._runs[me] = run
            if self._stopping:   # started as the stop came: back at once, not counted
                run.stop("shutdown")
            self.metrics.started(task.task)
            outcome = queries.LOST
            span = self._start_span(task)
            try:
                with self._tracer.use(span) if span is not None else contextlib.nullcontext():
                    outcome = await run.run()
            except psycopg.Error as exc:
                log.warning("task not ended: %s (its lease will be recovered)", exc,
                            extra={"job_id": task.job_id, "task": task.task})
            finally:
                if span is not None:
                    self._end_span(span, task, outcome, run)
                self._running.pop(me, None)
                self._runs.pop(me, None)
                self.metrics.ended(task.task, outcome, time.monotonic() - started)
                if run.conn is not None:
                    await self._conns.give_back(run.conn)
                if outcome == "failed":
                    self._drained = False   # its retry may be due at once: the next claim finds it
                if not self._stopping:
                    self._start_waiting()
                    if (self._room() >= self._refill() or not self._waiting) and not self._drained:
                        self._wake.set()

        me = asyncio.create_task(go())
        self._running[me] = task

    def _start_span(self, task: Task):
        if self._tracer is None:
            return None
        return self._tracer.start(database=self._conns.database, job_id=task.job_id, job_name=task.task,
                                  tenant=task.tenant_id, destination=task.task, attempt=task.attempt,
                                  traceparent=task.traceparent, task=True)

    def _end_span(self, span, task: Task, outcome: str, run: TaskRun) -> None:
        if outcome == "failed" and task.attempt < task.max_attempts:
            outcome = "retrying"
        self._tracer.end(span, database=self._conns.database, job_id=task.job_id, outcome=outcome,
                         sqlstate=run.sqlstate, error=run.error)

    async def _drain(self) -> None:
        """At stop: let running handlers finish within shutdown_seconds, then hand the rest back."""
        if not self._running:
            return
        log.info("task worker stopping: %d task(s) running, %.0f s to finish", len(self._running), self.shutdown_seconds)
        _done, pending = await asyncio.wait(list(self._running), timeout=self.shutdown_seconds)
        for task in pending:
            run = self._runs.get(task)
            if run is not None:
                run.stop("shutdown")
        if pending:
            await asyncio.wait(pending)
