"""One claimed task from its handler to its end: the handler runs (its writes, if any, in a transaction on a
connection of the worker's pool), a heartbeat renews the lease meanwhile, and the end is written: in the handler's
transaction (completed, when it wrote), together with other tasks' (completed, when it wrote nothing), or after
rolling back (failed, cancelled, handed back)."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable

import psycopg
from psycopg.types.json import Jsonb

from ..observe.logs import cap_text
from . import queries
from .context import Task, TaskContext

log = logging.getLogger("pgsql_broker")

Handler = Callable[[Any, TaskContext], Awaitable[Any]]


class TaskRun:
    """A task being run. `stop(reason)` ends its handler early: 'cancelled' (a cancel request, heard by the
    heartbeat), 'lost' (its lease is someone else's) or 'shutdown' (the worker's stop deadline passed).

    acquire: a connection of the pool, for ctx.conn; control: one statement on the worker's control connection
    (heartbeats, and the ends written outside the handler's transaction); complete_many: the batched completion
    of a handler that wrote nothing."""

    def __init__(self, task: Task, handler: Handler, lease_seconds: int,
                 acquire: Callable[[], Awaitable[psycopg.AsyncConnection]],
                 control: Callable[[str, dict], Awaitable[Any]],
                 complete_many: Callable[[Task, str | None], Awaitable[str]]):
        self.task = task
        self.ctx = TaskContext(task, acquire)
        self._handler = handler
        self._lease = lease_seconds
        self._control = control
        self._complete_many = complete_many
        self._call: asyncio.Task | None = None
        self.stopped: str | None = None
        self.error: str | None = None     # a failed handler's exception, and its SQLSTATE when it had one (the span)
        self.sqlstate: str | None = None

    @property
    def conn(self) -> psycopg.AsyncConnection | None:
        """The connection the handler opened, if it did (the worker takes it back after the end)."""
        return self.ctx.conn.opened

    def stop(self, reason: str) -> None:
        if self.stopped is None:
            self.stopped = reason
            self.ctx.cancel_reason = reason
            if self._call is not None:
                self._call.cancel()

    async def run(self) -> str:
        """Run the handler and end the task; the outcome: completed, failed, cancelled, lost or released."""
        started = time.monotonic()
        if self.stopped is not None:   # stopped before it started (the worker's stop)
            return await self._stopped_early()
        self._call = asyncio.create_task(self._call_handler())
        # (the heartbeat starts only once a third of the lease has passed: most tasks end before)
        beat: list[asyncio.Task] = []
        first = asyncio.get_running_loop().call_later(self._beat_every(), lambda: beat.append(asyncio.create_task(self._heartbeat())))
        try:
            output = await self._call
        except asyncio.CancelledError:
            if self.stopped is None:
                raise   # the worker itself is being cancelled
            return await self._stopped_early()
        except Exception as exc:  # the handler failed: its writes go, the attempt fails
            return await self._fail(exc, started)
        finally:
            first.cancel()
            for task in beat:
                task.cancel()
        return await self._complete(output, started)

    def _beat_every(self) -> float:
        return max(1.0, self._lease / 3)

    async def _call_handler(self) -> Any:
        if self.task.timeout is None:
            return await self._handler(self.task.args, self.ctx)
        seconds = self.task.timeout.total_seconds()
        try:
            async with asyncio.timeout(seconds):
                return await self._handler(self.task.args, self.ctx)
        except TimeoutError:
            raise TimeoutError(f"the task ran past its timeout of {seconds:g} s") from None

    async def _heartbeat(self) -> None:
        """Renew the lease every third of it; a cancel request or a lost lease stops the handler."""
        while True:
            try:
                state = await self._control(queries.EXTEND, self._params(lease=self._lease))
            except psycopg.Error as exc:
                log.warning("task heartbeat failed: %s", exc, extra=self._fields())
                state = None
            if state in (queries.CANCELLED, queries.LOST):
                self.stop(state)
                return
            await asyncio.sleep(self._beat_every())

    async def _complete(self, output: Any, started: float) -> str:
        conn = self.conn
        if conn is None or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return await self._complete_alone(output, started)
        try:   # in the handler's transaction: its writes and the completion commit together
            cur = await conn.execute(queries.COMPLETE, self._params(output=Jsonb(output) if output is not None else None))
            mine = (await cur.fetchone())[0]
        except psycopg.errors.QueryCanceled:   # a cancel request came first: it ends cancelled
            await self._rollback()
            self.stop(queries.CANCELLED)
            return await self._stopped_early()
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            return await self._completion_lost(exc)
        except (psycopg.Error, TypeError, ValueError) as exc:   # an output that is not JSON, a refused completion
            return await self._fail(exc, started)
        if not mine:
            await self._rollback()
            log.warning("task lease lost before its completion: its writes were rolled back", extra=self._fields())
            return queries.LOST
        await conn.commit()
        if log.isEnabledFor(logging.INFO):
            log.info("task completed", extra=self._fields(seconds=round(time.monotonic() - started, 3)))
        return "completed"

    async def _complete_alone(self, output: Any, started: float) -> str:
        """The handler wrote nothing: its completion joins the others' (completer.py)."""
        try:
            text = None if output is None else json.dumps(output)
            outcome = await self._complete_many(self.task, text)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            return await self._completion_lost(exc)
        except (psycopg.Error, TypeError, ValueError) as exc:
            return await self._fail(exc, started)
        if outcome == queries.CANCELLED:
            log.info("task cancelled before its completion", extra=self._fields())
        elif outcome == queries.LOST:
            log.warning("task lease lost before its completion", extra=self._fields())
        elif log.isEnabledFor(logging.INFO):
            log.info("task completed", extra=self._fields(seconds=round(time.monotonic() - started, 3)))
        return outcome

    async def _completion_lost(self, exc: BaseException) -> str:
        """The connection broke while the completion was written: the handler's writes (if any) are gone with it.
        The task is handed back uncounted (the handler ran; it runs again, at least once as ever), not failed: a
        passing network fault costs no attempt. If that fails too, the lease recovery takes it."""
        await self._rollback()
        released = await self._end(queries.RELEASE)
        log.warning("task completion lost with its connection (%s): %s", exc,
                    "handed back" if released else "left to lease recovery", extra=self._fields())
        return "released" if released else queries.LOST

    async def _fail(self, exc: BaseException, started: float) -> str:
        await self._rollback()
        message = cap_text(f"{type(exc).__name__}: {exc}")
        self.error, self.sqlstate = message, getattr(exc, "sqlstate", None)
        ended = await self._end(queries.FAIL, error=message, retry=True)
        log.warning("task failed: %s", message, extra=self._fields(seconds=round(time.monotonic() - started, 3)))
        return "failed" if ended else queries.LOST

    async def _stopped_early(self) -> str:
        await self._rollback()
        if self.stopped == queries.LOST:
            log.warning("task lease lost while it ran: its writes were rolled back", extra=self._fields())
            return queries.LOST
        if self.stopped == "shutdown":
            await self._end(queries.RELEASE)
            log.info("task handed back at the worker's stop deadline", extra=self._fields())
            return "released"
        await self._end(queries.FAIL, error="stopped on its cancel request", retry=True)   # ends it cancelled
        log.info("task cancelled while it ran", extra=self._fields())
        return queries.CANCELLED

    async def _end(self, sql: str, **params: Any) -> bool:
        """Write an end on the control connection (the handler's transaction is rolled back by then); False when
        the lease was lost or the database cannot be reached (the runner's lease recovery then ends the attempt)."""
        try:
            return bool(await self._control(sql, self._params(**params)))
        except psycopg.Error as exc:
            log.warning("could not record the task's end: %s", exc, extra=self._fields())
            return False

    async def _rollback(self) -> None:
        conn = self.conn
        if conn is not None and not conn.closed:
            try:
                await conn.rollback()
            except psycopg.Error:
                pass

    def _params(self, **extra: Any) -> dict:
        return {"job_id": self.task.job_id, "token": self.task.lease_token, **extra}

    def _fields(self, **extra: Any) -> dict:
        return {"job_id": self.task.job_id, "task": self.task.task, "attempt": self.task.attempt, **extra}
