"""The schedule tick of one active database: tick, sleep until the next fire time, tick again.

The extension decides everything (which fires are due, catch-up, overlap, exactly-once):
broker_schedule_tick enqueues the due jobs and answers how many seconds, on the server's
clock, remain until the next fire. The runner sleeps that long, or until a NOTIFY on
pgsql_broker_schedule says a schedule was added or changed, and never longer than
MAX_SLEEP_SEC (schedules written directly into the table send no NOTIFY), nor more often than
every MIN_INTERVAL_SEC.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import psycopg

from ..observe.metrics import Metrics
from . import queries

log = logging.getLogger("pgsql_broker")
MAX_SLEEP_SEC = 60.0
LATE_MARGIN_SEC = 0.002  # wake just after the fire time, so that it is due on the server
MIN_INTERVAL_SEC = 0.1   # any role may NOTIFY: never tick more than ten times a second


async def tick_schedules(connect: Callable[[str], Awaitable[psycopg.AsyncConnection]], database: str,
                         wake: asyncio.Event, stop: asyncio.Event, metrics: Metrics,
                         on_plan: Callable[[object], None]) -> None:
    """Run until `stop` is set; raise on connection loss (the caller reconnects)."""
    async with await connect("schedules") as conn:
        cur = conn.cursor(row_factory=queries.TICK_ROW)
        while not stop.is_set():
            wake.clear()
            tick = await (await cur.execute(queries.SCHEDULE_TICK)).fetchone()
            jobs, next_fire_at, seconds = tick.jobs_enqueued, tick.next_fire_at, tick.seconds_until_next
            metrics.schedule_ticks.labels(database).inc()
            if jobs:
                metrics.schedule_jobs.labels(database).inc(jobs)
                log.info("schedules fired", extra={"database": database, "jobs": jobs})
            on_plan(next_fire_at)
            delay = MAX_SLEEP_SEC if seconds is None else min(seconds + LATE_MARGIN_SEC, MAX_SLEEP_SEC)
            await asyncio.sleep(MIN_INTERVAL_SEC)
            delay = max(0.0, delay - MIN_INTERVAL_SEC)
            waiters = [asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())]
            try:
                await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
