"""Completions of tasks whose handlers wrote nothing in their transaction: nothing has to commit with each, so they
are written together (broker_complete_tasks), one statement for the tasks that finish meanwhile, on a connection of
their own, while the handlers that wrote commit their completion in their own transaction (running.py)."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Awaitable, Callable

import psycopg

from . import queries
from .context import Task

BATCH = 1000   # broker_complete_tasks' limit


class Completer:
    def __init__(self, connect: Callable[[], Awaitable[psycopg.AsyncConnection]]):
        self._connect = connect
        self._conn: psycopg.AsyncConnection | None = None
        self._pending: list[tuple[Task, str | None, asyncio.Future]] = []
        self._flushing = False

    async def complete(self, task: Task, output_json: str | None) -> str:
        """The task's outcome: completed, lost or cancelled (broker_complete_tasks)."""
        done = asyncio.get_running_loop().create_future()
        self._pending.append((task, output_json, done))
        if not self._flushing:
            self._flushing = True
            asyncio.create_task(self._flush())
        return await done

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(0)   # the handlers that finish in this turn of the loop join the first batch
            while self._pending:
                batch, self._pending = self._pending[:BATCH], self._pending[BATCH:]
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = await self._connect()
                    cur = await self._conn.execute(queries.COMPLETE_MANY, {
                        "job_ids": [t.job_id for t, _, _ in batch], "tokens": [t.lease_token for t, _, _ in batch],
                        "outputs": [out for _, out, _ in batch]})
                    outcomes = dict(await cur.fetchall())
                except psycopg.Error as exc:
                    for _, _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for task, _, done in batch:
                    if not done.done():
                        done.set_result(outcomes.get(task.job_id, queries.LOST))
        finally:
            self._flushing = False

    async def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None
