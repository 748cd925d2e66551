"""What a handler is given: its task as claimed, and the connection whose transaction commits with its completion."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
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


class TaskContext:
    """A handler's second argument. `conn` is in a transaction that the worker commits together with the task's
    completion (broker_complete_task), or rolls back when the handler raises, times out, is cancelled or loses its
    lease: what the handler writes there happens exactly once. Work outside the database is at least once."""

    def __init__(self, task: Task, conn: psycopg.AsyncConnection):
        self.task = task
        self.conn = conn
        self.cancel_reason: str | None = None   # why the handler was stopped, when it was

    @property
    def job_id(self) -> int:
        return self.task.job_id

    @property
    def attempt(self) -> int:
        return self.task.attempt
