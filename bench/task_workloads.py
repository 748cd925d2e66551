"""pgsql_broker's tasks in the common workloads: application handlers, like every peer's, run by the Python task
worker (pgsql_broker.tasks.Worker) at its defaults. The like-for-like row beside PgQueuer, Procrastinate, Graphile
Worker and pg-boss: each runs a no-op handler in its own worker process, and a job starts when its handler starts
(time.time() recorded by the handler, as the peers' handlers record it)."""
from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

from . import common
from .broker_workloads import Broker

SERIES = "batch 1000: broker_add_task(...) for each row of generate_series(1,1000)"
ADD_JOBS = "batch 1000: broker_add_jobs, task elements (set-based)"


class BrokerTasks(Broker):
    name = "pgsql_broker-tasks"
    label = "pgsql_broker tasks (Python worker, defaults)"
    config = ("pgsql-broker worker, Worker() at its defaults: concurrency 32, prefetch 32, LISTEN/NOTIFY "
              "(pgsql_broker_task) with a 5 s poll, lease 60 s; one no-op handler; enqueue by broker_add_task")
    doc = "runner/pgsql_broker/tasks/worker.py (Worker's defaults)"
    template = "bench_tpl_broker_tasks"

    async def enqueue_one(self) -> int:
        cur = await self.conn.execute("SELECT job_id FROM broker.broker_add_task('noop')")
        return (await cur.fetchone())[0]

    async def latency_enqueues(self, n: int) -> dict:
        return await common.latency_loop(self.enqueue_one, n)

    async def enqueue_runs(self, n_single: int, n_batches: int, batch: int) -> dict:
        return await super(Broker, self).enqueue_runs(n_single, n_batches, batch)

    def batch_variants(self) -> list:
        return [(SERIES, self.add_task_series), (ADD_JOBS, self.add_jobs_tasks)]

    async def add_jobs_tasks(self, size: int) -> None:
        """The set-based call: broker_add_jobs with task elements."""
        jobs = json.dumps([{"task": "noop", "args": {"n": i}} for i in range(size)])
        cur = await self.conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s::jsonb)", (jobs,))
        made = (await cur.fetchone())[0]
        if made != size:
            raise RuntimeError(f"a batch of {size} tasks enqueued {made}")

    async def add_task_series(self, size: int) -> None:
        # (each call names its row's number, {"n": g}: a call that names nothing of the row is made once and
        # joined to every row, one task for the batch)
        cur = await self.conn.execute("SELECT count(DISTINCT t.job_id) FROM generate_series(1, %s) AS g, "
                                      "LATERAL broker.broker_add_task('noop', jsonb_build_object('n', g)) AS t", (size,))
        made = (await cur.fetchone())[0]
        if made != size:
            raise RuntimeError(f"a batch of {size} tasks enqueued {made}")

    async def preload(self, n: int) -> None:
        """Plain INSERT into the task name's queue (the triggers keep the bookkeeping), the fastest way in."""
        await self.conn.execute(
            "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_language, job_queue) "
            "SELECT 'noop', 'noop', '{}', 'task', broker._task_queue('bench', 'noop') FROM generate_series(1, %s)", (n,))

    def worker_argv(self, db: str, outfile) -> list[str]:
        return [sys.executable, "-m", "bench.task_workloads", db, str(outfile)]

    async def start_times(self, outfile) -> dict:
        return await super(Broker, self).start_times(outfile)


async def _work(db: str, outfile: str) -> None:
    from pgsql_broker.tasks import Worker
    worker = Worker(f"dbname={db}")
    starts: dict[int, float] = {}

    @worker.task("noop")
    async def noop(args, ctx) -> None:
        starts[ctx.job_id] = time.time()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, worker.stop)
    try:
        await worker.run()
    finally:
        with open(outfile, "w") as f:
            json.dump(starts, f)


if __name__ == "__main__":
    asyncio.run(_work(sys.argv[1], sys.argv[2]))
