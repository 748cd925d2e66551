"""pgsql_broker in the common workloads: `pgbroker-runner` with default settings.

Jobs are `SELECT 1` spread over the runner's default 4 queues. Latency's start
is the job's server-side started_at (set by the claim), same machine clock as t0.
"""
from __future__ import annotations

import sys

from psycopg.types.json import Jsonb

from . import common
from .workloads import PgSystem

QUEUES = 4  # the runner's default queue_count
ADD_JOBS = "broker.broker_add_jobs(jsonb, text)"
MISSING = "n/a (broker_add_jobs missing)"
FALLBACK = "batch 1000: SELECT broker_add_job(...) FROM generate_series(1,1000)"


class Broker(PgSystem):
    name = "pgsql_broker"
    label = "pgsql_broker"
    version = "this tree"
    config = "pgbroker-runner with its default settings (4 queues, so up to 4 jobs at once)"
    doc = "runner/pgsql_broker (its defaults)"
    template = "bench_tpl_broker"
    remaining_sql = "SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2"
    # the group index holds exactly the unfinished jobs; its order makes the planner use it
    any_left_sql = ("SELECT count(*) FROM (SELECT 1 FROM broker.broker_jobs WHERE complete_status = ANY ('{0,1}'::smallint[]) "
                    "ORDER BY tenant_id, job_group LIMIT 1) AS x")

    def make_template(self) -> None:
        # one broker_add_job creates the executor of the enqueuing role, which raw INSERTs
        # (preload) do not do; the job is deleted again.
        common.create_db(self.template, None, "CREATE EXTENSION pgsql_broker",
                         "SELECT broker.broker_add_job('warm', 'SELECT 1')",
                         "DELETE FROM broker.broker_jobs")

    async def enqueue_one(self) -> int:
        cur = await self.conn.execute("SELECT job_id FROM broker.broker_add_job('single', 'SELECT 1')")
        return (await cur.fetchone())[0]

    def batch_variants(self) -> list:
        return [("batch 1000: broker_add_jobs", self.add_jobs if self.has_add_jobs else MISSING),
                (FALLBACK, self.add_job_series)]

    @property
    def has_add_jobs(self) -> bool:
        return common.scalar(self.template, "SELECT to_regprocedure(%s) IS NOT NULL", (ADD_JOBS,))

    async def add_jobs(self, size: int) -> None:
        jobs = Jsonb([{"job_name": "bulk", "execute_str": "SELECT 1", "job_queue": 1 + i % QUEUES}
                      for i in range(size)])
        cur = await self.conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s)", (jobs,))
        if (await cur.fetchone())[0] != size:
            raise RuntimeError("broker_add_jobs returned a wrong number of rows")

    async def add_job_series(self, size: int) -> None:
        await self.conn.execute(
            "SELECT count(j.job_id) FROM generate_series(1, %s) AS g, "
            "LATERAL broker.broker_add_job('bulk', 'SELECT 1', p_job_queue => 1 + g %% %s) AS j", (size, QUEUES))

    async def preload(self, n: int) -> None:
        """Plain INSERT (the triggers keep the bookkeeping), the fastest way in."""
        await self.conn.execute(
            "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
            "SELECT 'drain', 'drain', 'SELECT 1', 1 + g %% %s FROM generate_series(1, %s) AS g", (QUEUES, n))

    def worker_argv(self, db: str, outfile) -> list[str]:
        return [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                "--dsn", f"dbname={db}", "--metrics-host", "127.0.0.1", "--metrics-port", str(common.free_port()),
                "--log-level", "warning", "--allow-privileged-login"]  # a throwaway cluster's superuser

    async def start_times(self, outfile) -> dict:
        cur = await self.conn.execute("SELECT job_id, extract(epoch FROM started_at)::float8 FROM broker.broker_jobs")
        return {job: started for job, started in await cur.fetchall() if started is not None}
