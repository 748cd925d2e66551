"""The maintenance task of an active database: deferred dependency releases, lease recovery, and the queue
depths and instances the dashboard and metrics show."""
from __future__ import annotations

import asyncio
import logging
import time

from psycopg.rows import dict_row

from ..observe.metrics import bounded_stats
from . import queries

log = logging.getLogger("pgsql_broker")
# Deferred dependency releases: how often the maintenance task looks for them (at most queue_timer_sec).
RELEASE_POLL_SEC = 1.0


async def maintain(runner) -> None:
    """Run until the runner drains; raise on connection loss (the session restarts)."""
    db, settings, view = runner.db, runner.settings, runner.view
    next_recover = next_stats = next_release = 0.0
    async with await runner._connect("maintenance") as conn:
        while not runner._draining.is_set():
            now = time.monotonic()
            if now >= next_release:
                # deferred dependency releases (large fan-ins): never on a claim's path, bounded per call, and
                # a call never waits on a lock; again while it applies something
                while not runner._draining.is_set():
                    if not (await (await conn.execute(queries.APPLY_RELEASES)).fetchone())[0]:
                        break
                next_release = now + min(RELEASE_POLL_SEC, settings.queue_timer_sec)
            if now >= next_recover:
                cur = conn.cursor(row_factory=queries.RECOVERED_ROW)
                for row in await (await cur.execute(queries.RECOVER)).fetchall():
                    log.warning("recovered a job whose lease expired", extra={"database": db.name,
                                                                              "job_id": row.job_id, "status": row.status})
                next_recover = now + settings.stale_job_recovery_sec
            if now >= next_stats:
                cur = conn.cursor(row_factory=dict_row)
                view.queue_stats = bounded_stats(await (await cur.execute(queries.QUEUE_STATS)).fetchall(),
                                                 db.queue_count)
                view.metrics.set_depth(db.name, view.queue_stats)
                view.instances = await (await cur.execute(queries.INSTANCES)).fetchall()
                next_stats = now + settings.queue_depth_poll_sec
            try:
                await asyncio.wait_for(runner._draining.wait(),
                                       min(next_recover, next_stats, next_release) - time.monotonic())
            except asyncio.TimeoutError:
                pass
