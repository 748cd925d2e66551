"""What a handler is given: its task as claimed, and the connection whose transaction commits with its completion."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable
from uuid import UUID

import psycopg


@dataclass(frozen=True)
class Task:
    """A claimed task: a row of broker.broker_claim_tasks."""
    job_id: int
    task: str
    args: Any
    tenant_id: str
    attempt: int
    max_attempts: int
    lease_token: UUID
    lease_expires_at: datetime
    timeout: timedelta | None
    traceparent: str | None = None   # its enqueuer's trace context (the parent of the attempt's span)


class TaskConnection:
    """`ctx.conn`: the task's connection, taken from the worker's pool when the handler first uses it, in a
    transaction that commits with the task's completion. `await ctx.conn.execute(...)` is psycopg's
    AsyncConnection.execute; for anything else take the connection itself: `conn = await ctx.connection()`. A
    handler that never uses it holds no connection, and its completion joins others' in one statement."""

    def __init__(self, acquire: Callable[[], Awaitable[psycopg.AsyncConnection]]):
        self._acquire = acquire
        self.opened: psycopg.AsyncConnection | None = None

    async def connection(self) -> psycopg.AsyncConnection:
        if self.opened is None:
            self.opened = await self._acquire()
        return self.opened

    async def execute(self, query, params=None, **kwargs) -> psycopg.AsyncCursor:
        return await (await self.connection()).execute(query, params, **kwargs)

    def __getattr__(self, name: str):
        if self.opened is None:
            raise AttributeError(f"ctx.conn.{name}: the task's connection opens with ctx.conn.execute() "
                                 "or `conn = await ctx.connection()`")
        return getattr(self.opened, name)


class TaskContext:
    """A handler's second argument. What the handler writes through `conn` (or `await connection()`) is in one
    transaction that the worker commits together with the task's completion (broker_complete_task), or rolls back
    when the handler raises, times out, is cancelled or loses its lease: it happens exactly once. Work outside the
    database is at least once."""

    def __init__(self, task: Task, acquire: Callable[[], Awaitable[psycopg.AsyncConnection]]):
        self.task = task
        self.conn = TaskConnection(acquire)
        self.cancel_reason: str | None = None   # why the handler was stopped, when it was

    async def connection(self) -> psycopg.AsyncConnection:
        """The task's connection itself (psycopg's AsyncConnection), in the task's transaction."""
        return await self.conn.connection()

    @property
    def job_id(self) -> int:
        return self.task.job_id

    @property
    def attempt(self) -> int:
        return self.task.attempt
