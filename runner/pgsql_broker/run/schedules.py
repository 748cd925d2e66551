"""The schedule tick of one active database, on its session connection: tick, then again at the next fire time.

The extension decides everything (which fires are due, catch-up, overlap, exactly-once):
broker_schedule_tick enqueues the due jobs and answers how many seconds, on the server's
clock, remain until the next fire. The session loop ticks again that long after, or as soon
as a NOTIFY on pgsql_broker_schedule says a schedule was added or changed, and never longer
than MAX_SLEEP_SEC (schedules written directly into the table send no NOTIFY), nor more often
than every MIN_INTERVAL_SEC.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import psycopg

from ..observe.metrics import Metrics
from . import queries

log = logging.getLogger("pgsql_broker")
MAX_SLEEP_SEC = 60.0
LATE_MARGIN_SEC = 0.002  # tick just after the fire time, so that it is due on the server
MIN_INTERVAL_SEC = 0.1   # any role may NOTIFY: never tick more than ten times a second


class ScheduleTicker:
    """When the next tick is due (monotonic clock), and the tick itself."""

    def __init__(self, database: str, metrics: Metrics, on_plan: Callable[[object], None]):
        self.database, self.metrics, self.on_plan = database, metrics, on_plan
        self.due_at = 0.0  # at once
        self._last = float("-inf")

    def changed(self) -> None:
        """A schedule was added or changed: tick soon."""
        self.due_at = min(self.due_at, max(time.monotonic(), self._last + MIN_INTERVAL_SEC))

    async def tick(self, conn: psycopg.AsyncConnection) -> None:
        cur = conn.cursor(row_factory=queries.TICK_ROW)
        tick = await (await cur.execute(queries.SCHEDULE_TICK)).fetchone()
        self._last = time.monotonic()
        self.metrics.schedule_ticks.labels(self.database).inc()
        if tick.jobs_enqueued:
            self.metrics.schedule_jobs.labels(self.database).inc(tick.jobs_enqueued)
            log.info("schedules fired", extra={"database": self.database, "jobs": tick.jobs_enqueued})
        self.on_plan(tick.next_fire_at)
        seconds = tick.seconds_until_next
        delay = MAX_SLEEP_SEC if seconds is None else min(seconds + LATE_MARGIN_SEC, MAX_SLEEP_SEC)
        self.due_at = self._last + max(delay, MIN_INTERVAL_SEC)
