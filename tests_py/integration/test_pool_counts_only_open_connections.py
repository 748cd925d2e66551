"""The runner's count of a database's connections (the console, /state, the budget test) is what is open on the
server: a worker waiting at the runner-wide cap for a slot holds no connection and is not counted."""
from __future__ import annotations

import asyncio

import psycopg

from pgsql_broker.run.pool import RunnerBudget, WorkerPool


def test_a_worker_waiting_at_the_runner_cap_is_not_counted(db):
    async def scenario() -> None:
        budget = RunnerBudget(1)
        connect = lambda: psycopg.AsyncConnection.connect(dbname=db, autocommit=True)  # noqa: E731
        first = WorkerPool(connect, cap=4, budget=budget, max_idle=60, max_lifetime=3600)
        second = WorkerPool(connect, cap=4, budget=budget, max_idle=60, max_lifetime=3600)
        held = await first.get()
        waiting = asyncio.create_task(second.get())  # the runner-wide slot is taken: it waits
        await asyncio.sleep(0.2)
        assert not waiting.done()
        assert (first.connected, second.connected) == (1, 0)
        await first.put(held)  # idle now: the waiting pool evicts it and takes the slot
        conn = await asyncio.wait_for(waiting, 10)
        assert (first.connected, second.connected) == (0, 1)
        await second.put(conn)
        await first.close()
        await second.close()
        assert (first.connected, second.connected, budget.open) == (0, 0, 0)

    asyncio.run(scenario())
