"""Retention on a policy: the session connection's timers (run/maintenance.py) purge finished jobs older than the age set for their final
state (broker.retention_*), in batches of one short transaction each (broker_purge_jobs), every
retention_interval_sec. broker_purge_jobs is not granted to broker_runtime: the runner's login needs the
role broker_retention (docs/operations.md); without it the runner says so once and purges nothing.
"""
from __future__ import annotations

import asyncio
import logging

import psycopg
from psycopg import errors

from ..config import parse_duration
from ..settings import BrokerSettings
from ..states import JobState
from . import queries

log = logging.getLogger("pgsql_broker")
# Batches per state and pass at most: a large backlog is purged over several passes, so that the
# maintenance connection's other work (lease recovery, deferred releases) waits one pass at most.
MAX_BATCHES = 100


def ages(settings: BrokerSettings) -> list[tuple[int, str]]:
    """(final state, age as an interval literal) for each state the policy purges."""
    result = []
    for state in JobState.finished():
        text = getattr(settings, f"retention_{state.name.lower()}_after").strip().lower()
        if text != "never":
            result.append((int(state), f"{parse_duration(text)} seconds"))
    return result


class Retention:
    """The policy of one database's runner; `purge` is one pass."""

    def __init__(self, settings: BrokerSettings, database: str):
        self.ages = ages(settings) if settings.retention_enabled else []
        self.batch = settings.retention_batch_size
        self.database = database
        self._refused = False
        self.more = False  # the last pass stopped at max_batches for a state: more is due

    async def purge(self, conn: psycopg.AsyncConnection, stop: asyncio.Event, max_batches: int = MAX_BATCHES) -> int:
        """Purge what the policy says is due, at most max_batches per state; returns the jobs deleted."""
        total, self.more = 0, False
        for state, age in self.ages:
            for n in range(max_batches):
                if stop.is_set():
                    return total
                try:
                    cur = await conn.execute(queries.PURGE, {"older_than": age, "batch": self.batch, "state": state})
                except errors.InsufficientPrivilege:
                    if not self._refused:
                        self._refused = True
                        log.warning("retention is on but this login may not purge: GRANT broker_retention TO "
                                    "the runner's login, or set broker.retention_enabled to false",
                                    extra={"database": self.database})
                    return total
                deleted = (await cur.fetchone())[0]
                total += deleted
                if deleted < self.batch:
                    break
                self.more = self.more or n == max_batches - 1
        self._refused = False
        if total:
            log.info("purged finished jobs on the retention policy", extra={"database": self.database, "jobs": total})
        return total
