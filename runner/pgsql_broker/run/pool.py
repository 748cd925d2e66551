"""Worker connections: borrowed from a pool per database, under a cap per database and one per server.

A database's session connection (LISTEN, the instance lock, maintenance, schedules, the poll) is its own and
always open; worker connections are opened when a queue has work, kept warm for conn_max_idle_time after it
(so a burst after a pause does not pay a connect), renewed after conn_max_lifetime, and closed at idle: an idle
runner holds one connection per database and opens none. When the runner-wide cap is reached, a database that
needs a connection closes the idle one that waited longest (of any database) rather than wait for it.
"""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

import psycopg


class RunnerBudget:
    """The count of open worker connections to one server, of all its databases (cap None: no cap)."""

    def __init__(self, cap: int | None):
        self.cap, self.open = cap, 0
        self.pools: list[WorkerPool] = []
        self._changed = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._changed:
            while True:
                if self.cap is None or self.open < self.cap:
                    self.open += 1
                    return
                oldest = min((p for p in self.pools if p.idle), key=lambda p: p.idle[0][2], default=None)
                if oldest is not None:
                    # its slot in this count is ours now, once it is closed: a connection opened before
                    # would be one more than the cap on the server for as long as the close waits its turn
                    await oldest.evict_oldest_idle()
                    return
                await self._changed.wait()

    async def release(self) -> None:
        async with self._changed:
            self.open -= 1
            self._changed.notify()

    async def idle_now(self) -> None:
        """A connection went idle: a database waiting at the cap may close it for itself."""
        async with self._changed:
            self._changed.notify()


class WorkerPool:
    """The worker connections of one database (at most `cap` open)."""

    def __init__(self, connect: Callable[[], Awaitable[psycopg.AsyncConnection]], cap: int, budget: RunnerBudget,
                 max_idle: float, max_lifetime: float, max_warm: int = 5,
                 on_connect: Callable[[float], None] | None = None):
        """max_idle: an idle connection is closed after it; max_warm: at most this many are kept idle."""
        self._connect, self.cap, self.budget, self.max_warm = connect, cap, budget, max_warm
        self.max_idle, self.max_lifetime, self._on_connect = max_idle, max_lifetime, on_connect
        self.idle: list[tuple[psycopg.AsyncConnection, float, float]] = []  # (conn, opened, idle since), oldest first
        self.open = 0
        self._opened: dict[int, float] = {}
        self._changed = asyncio.Condition()
        self._closing: set[asyncio.Task] = set()
        budget.pools.append(self)

    @property
    def connected(self) -> int:
        """Connections open now (borrowed or idle); `open` also counts a worker still waiting for its slot."""
        return len(self._opened)

    async def get(self) -> psycopg.AsyncConnection:
        """A warm idle connection (the most recent one), else a new one once the caps allow it."""
        self.reap()
        async with self._changed:
            while True:
                while self.idle:
                    conn, _, _ = self.idle.pop()
                    if not conn.closed and not conn.broken:
                        return conn
                    self._drop(conn, release_budget=True)
                if self.open < self.cap:
                    self.open += 1
                    break
                await self._changed.wait()
        try:
            await self.budget.acquire()
        except BaseException:
            await self._release()
            raise
        started = time.perf_counter()
        try:
            conn = await self._connect()
        except BaseException:
            await self.budget.release()
            await self._release()
            raise
        if self._on_connect is not None:
            self._on_connect(time.perf_counter() - started)
        self._opened[id(conn)] = time.monotonic()
        return conn

    async def put(self, conn: psycopg.AsyncConnection) -> None:
        """Hand a connection back: kept warm unless it is closed, broken, in a transaction or past its lifetime."""
        now = time.monotonic()
        opened = self._opened.get(id(conn), now)
        async with self._changed:
            if (conn.closed or conn.broken or now - opened >= self.max_lifetime or len(self.idle) >= self.max_warm
                    or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE):
                self._drop(conn, release_budget=True)
            else:
                self.idle.append((conn, opened, now))
            self._changed.notify()
        await self.budget.idle_now()

    def reap(self) -> None:
        """Close the connections idle for max_idle (called from the session loop: no task of its own)."""
        now = time.monotonic()
        while self.idle and now - self.idle[0][2] >= self.max_idle:
            self._drop(self.idle.pop(0)[0], release_budget=True)

    async def evict_oldest_idle(self) -> None:
        """Close the oldest idle connection for another database (RunnerBudget keeps its runner-wide slot)."""
        await self._drop(self.idle.pop(0)[0], release_budget=False)

    def _drop(self, conn: psycopg.AsyncConnection, release_budget: bool) -> asyncio.Task:
        """Forget a connection at once (the counts) and close it in the background (the task, to wait for it)."""
        self._opened.pop(id(conn), None)
        self.open -= 1
        task = asyncio.get_running_loop().create_task(self._close(conn, release_budget))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        return task

    async def _close(self, conn: psycopg.AsyncConnection, release_budget: bool) -> None:
        try:
            await conn.close()
        finally:
            if release_budget:
                await self.budget.release()
            async with self._changed:
                self._changed.notify()

    async def _release(self) -> None:
        async with self._changed:
            self.open -= 1
            self._changed.notify()

    async def close(self) -> None:
        """Close every idle connection (the session ends); borrowed ones are closed by their workers."""
        while self.idle:
            self._drop(self.idle.pop()[0], release_budget=True)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
