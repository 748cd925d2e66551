"""A task worker with nothing waiting claims when a NOTIFY says a task is ready, once, not again after each task
ends: a claim that took less than it asked found every ready task (the next one notifies). A task that failed
may be due again at once (its retry), so its end is followed by a claim. The worker polls once an hour here, so
every claim counted is one the worker chose to make."""
from __future__ import annotations

import asyncio
import os
import threading
import time

from conftest import connect
from worker_process import worker_login

TASKS = 5


def _wait(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _completed(conn, job_id: int) -> bool:
    return conn.execute("SELECT complete_status = broker._state('completed') FROM broker.broker_jobs WHERE job_id = %s",
                        (job_id,)).fetchone()[0]


def test_a_resting_worker_claims_once_a_task_and_again_after_a_failure(db):
    from pgsql_broker.tasks import Worker
    with worker_login(db) as login, connect(db) as conn:
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        dsn = f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={login}"
        worker = Worker(dsn, concurrency=4, poll_seconds=3600, shutdown_seconds=1)
        claims = []
        claim = worker._claim

        async def counted() -> int:
            claims.append(await claim())
            return claims[-1]
        worker._claim = counted

        @worker.task("rest")
        async def rest(args, ctx):
            if args.get("fail") and ctx.attempt == 1:
                raise RuntimeError("the first attempt fails")
            return None

        thread = threading.Thread(target=lambda: asyncio.run(worker.run()), daemon=True)
        thread.start()
        try:
            _wait(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                       "AND query = 'LISTEN pgsql_broker_task'").fetchone()[0] == 1
                  and claims, "the worker's LISTEN and its first claim")
            before = len(claims)
            for n in range(TASKS):
                job_id = conn.execute("SELECT job_id FROM broker.broker_add_task('rest', %s::jsonb)",
                                      (f'{{"n": {n}}}',)).fetchone()[0]
                _wait(lambda: _completed(conn, job_id), f"task {n}")
            assert len(claims) - before == TASKS, claims[before:]
            assert claims[before:] == [1] * TASKS

            job_id = conn.execute("SELECT job_id FROM broker.broker_add_task('rest', '{\"fail\": true}', "
                                  "p_max_attempts => 2)").fetchone()[0]
            # without a claim after the failure, its retry would wait for the hourly poll
            _wait(lambda: _completed(conn, job_id), "the failed task's retry")
            assert conn.execute("SELECT attempts FROM broker.broker_jobs WHERE job_id = %s", (job_id,)).fetchone()[0] == 2
        finally:
            worker.stop()
            thread.join(30)
        assert not thread.is_alive()
