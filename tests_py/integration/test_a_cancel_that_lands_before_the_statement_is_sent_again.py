"""A cancel request for an autonomous job can reach the job's own connection in the moment after the runner
registered it and before the job's statement arrived there: PostgreSQL ignores a cancel sent to an idle backend.
The runner sends the cancel again while the job still runs on that connection (every POLL_SEC), so the statement
that follows is cancelled too (run/cancelling.py)."""
from __future__ import annotations

import asyncio

import psycopg
import pytest
from prometheus_client import CollectorRegistry, Counter

from conftest import add_job, connect, dsn
from pgsql_broker.run.cancelling import POLL_SEC, Canceller

GUARD_SEC = 30  # a hang guard: with the resend, the statement ends about POLL_SEC after it starts


def running_with_a_cancel_request(db: str) -> int:
    """A job claimed (running, its lease held) with a cancel request for its current attempt."""
    with connect(db) as conn:
        job_id = add_job(conn, "slow", "SELECT pg_sleep(60)")
        conn.execute("UPDATE broker.broker_jobs SET complete_status = 1, attempts = 1, "
                     "started_at = now() - interval '1 second', lease_token = gen_random_uuid(), "
                     "lease_expires_at = now() + interval '1 hour' WHERE job_id = %s", (job_id,))
        assert conn.execute("SELECT broker.broker_cancel_job(%s, 'stop it')", (job_id,)).fetchone()[0] == 1
    return job_id


async def _scenario(db: str, job_id: int) -> None:
    session = await psycopg.AsyncConnection.connect(dsn(db), autocommit=True)
    own = await psycopg.AsyncConnection.connect(dsn(db), autocommit=True)
    try:
        counter = Counter("cancels", "cancels sent", ["database", "queue"], registry=CollectorRegistry())
        canceller = Canceller(db, {}, counter, {job_id: (1, own)})
        await canceller.apply(session)  # the job's connection is still idle: PostgreSQL ignores this cancel
        assert counter.labels(db, "1")._value.get() == 1
        try:  # (the backend may take the ignored signal a moment late: it would end this statement, not the job's)
            await own.execute("SELECT pg_sleep(0.2)")
        except psycopg.errors.QueryCanceled:
            pass
        run = asyncio.ensure_future(own.execute("SELECT pg_sleep(60)"))  # now the job's statement arrives
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GUARD_SEC
        while not run.done() and loop.time() < deadline:  # the runner applies cancels on hints and on a timer
            await canceller.apply(session)
            await asyncio.sleep(POLL_SEC / 4)
        assert run.done(), "the cancel was never sent again: the job's statement ran on"
        with pytest.raises(psycopg.errors.QueryCanceled):
            await run
    finally:
        await own.close()
        await session.close()


def test_a_cancel_that_reached_an_idle_connection_is_sent_again(db):
    asyncio.run(_scenario(db, running_with_a_cancel_request(db)))
