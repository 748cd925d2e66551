"""The worker's connections: a control connection (claims, heartbeats, ends of tasks not started), one per running
task (its handler's transaction, kept for the next task), and the LISTEN connection."""
from __future__ import annotations

import asyncio
import contextlib
import os

import psycopg

from ..config import connection_strings
from . import queries


class Connections:
    def __init__(self, dsn: str | None, tenant: str | None, application_name: str):
        self.dsn = dsn
        self.tenant = tenant
        self.application_name = application_name
        self.database = ""
        self.serving = ""   # the tenant the connections act for, as the server sees it
        self._control: psycopg.AsyncConnection | None = None
        self._idle: list[psycopg.AsyncConnection] = []
        self.lock = asyncio.Lock()   # the control connection serves one statement at a time

    def conninfo(self) -> str:
        return self.dsn if self.dsn is not None else connection_strings((), os.environ)[0][0]

    async def connect(self, autocommit: bool, relaxed_commit: bool = False) -> psycopg.AsyncConnection:
        """relaxed_commit: the connection's commits do not wait for their WAL flush (synchronous_commit off). For
        claims, heartbeats and the completions of handlers that wrote nothing: a commit lost with a server crash
        leaves the task as it was before it (claimed again, or recovered after its lease and run again), so it costs
        at most a second run, as any crash between a task's work and its completion does; what a handler writes in
        ctx.conn commits as the server is configured, together with its completion."""
        conn = await psycopg.AsyncConnection.connect(self.conninfo(), autocommit=autocommit,
                                                     application_name=self.application_name)
        conn.prepare_threshold = None
        if relaxed_commit:
            await conn.execute(queries.RELAXED_COMMIT)
        if self.tenant is not None:
            await conn.execute(queries.SET_TENANT, {"tenant": self.tenant})
            if not autocommit:
                await conn.commit()
        return conn

    async def control(self) -> psycopg.AsyncConnection:
        """The control connection (opened again when it was lost); hold `lock` while using it."""
        if self._control is None or self._control.closed:
            self._control = await self.connect(autocommit=True, relaxed_commit=True)
            self.database, self.serving = await (await self._control.execute(queries.SESSION)).fetchone()
        return self._control

    async def control_call(self, sql: str, params: dict):
        """One statement on the control connection; its first row's first column."""
        async with self.lock:
            conn = await self.control()
            return (await (await conn.execute(sql, params)).fetchone())[0]

    async def control_rows(self, sql: str, params: dict) -> list:
        """One statement on the control connection; all its rows."""
        async with self.lock:
            conn = await self.control()
            return await (await conn.execute(sql, params)).fetchall()

    async def close_control(self) -> None:
        if self._control is not None:
            with contextlib.suppress(psycopg.Error):
                await self._control.close()
            self._control = None

    async def task_conn(self) -> psycopg.AsyncConnection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await self.connect(autocommit=False)

    async def give_back(self, conn: psycopg.AsyncConnection) -> None:
        if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
        else:
            self._idle.append(conn)

    async def close(self) -> None:
        await self.close_control()
        for conn in self._idle:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
        self._idle.clear()
