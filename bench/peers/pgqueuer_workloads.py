"""PgQueuer (pip pgqueuer[asyncpg]==1.6.0) in the common workloads, run the way its README says.

Schema: `pgq install` (PGDATABASE = the template). Enqueue: Queries.enqueue on an
asyncpg connection (its Quick Start), a scalar call for one job, lists for a batch.
Worker: `pgqueuer.run(factory)` ("run a worker from factory, as `pgq run` does,
without the CLI": the 1.6.0 CLI stops with "'str' object has no attribute 'name'"
under typer 0.29) in its own process (`python -m bench.peers.pgqueuer_workloads
DB OUTFILE`): one entrypoint "noop", at most 4 jobs at once in the process
(max_concurrent_tasks=4, which requires batch_size <= 2, so batch_size=2), every
other setting at its default. (Its per-entrypoint concurrency_limit=4 is a
cross-worker limit kept in the database; with it this worker drained 36 jobs/s
here, against ~450 with max_concurrent_tasks. BENCH_PGQ_LIMIT, BENCH_PGQ_BATCH,
BENCH_PGQ_MAX_TASKS (0 = no cap) override the three for such comparisons.)
The handler records time.time() per job id; the factory writes them to a JSON
file when the worker stops. Completed jobs leave the queue table.
"""
from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from contextlib import asynccontextmanager

import asyncpg
import pgqueuer
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from ..workloads import PgSystem

LIMIT = int(os.environ.get("BENCH_PGQ_LIMIT", "0"))  # 0: no per-entrypoint limit (its default)
BATCH_SIZE = int(os.environ.get("BENCH_PGQ_BATCH", "2"))
MAX_TASKS = int(os.environ.get("BENCH_PGQ_MAX_TASKS", "4"))


class PgQueuerSystem(PgSystem):
    name = "pgqueuer"
    template = "bench_tpl_pgqueuer"
    remaining_sql = "SELECT count(*) FROM pgqueuer"
    any_left_sql = "SELECT count(*) FROM (SELECT 1 FROM pgqueuer LIMIT 1) AS x"

    def install_argv(self) -> list[str]:
        return [sys.executable, "-m", "pgqueuer", "install"]

    async def open(self, db: str) -> None:
        await super().open(db)
        self.apg = await asyncpg.connect(database=db)
        self.queries = Queries(AsyncpgDriver(self.apg))

    async def close(self) -> None:
        await self.apg.close()
        await super().close()

    async def enqueue_one(self) -> int:
        return (await self.queries.enqueue("noop", None))[0]

    async def enqueue_batch(self, size: int) -> None:
        await self.queries.enqueue(["noop"] * size, [None] * size, [0] * size)

    def worker_argv(self, db: str, outfile) -> list[str]:
        return [sys.executable, "-m", "bench.peers.pgqueuer_workloads", db, str(outfile)]


@asynccontextmanager
async def worker(db: str, outfile: str):
    """The worker factory: a PgQueuer with one no-op entrypoint."""
    connection = await asyncpg.connect(database=db)
    pgq = PgQueuer(AsyncpgDriver(connection))
    starts: dict[int, float] = {}

    @pgq.entrypoint("noop", concurrency_limit=LIMIT)
    async def noop(job: Job) -> None:
        starts[job.id] = time.time()

    try:
        yield pgq
    finally:
        with open(outfile, "w") as f:
            json.dump(starts, f)
        await connection.close()


if __name__ == "__main__":
    asyncio.run(pgqueuer.run(functools.partial(worker, sys.argv[1], sys.argv[2]),
                             batch_size=BATCH_SIZE, max_concurrent_tasks=MAX_TASKS or None))
