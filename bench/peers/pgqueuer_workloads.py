"""PgQueuer (pip pgqueuer[asyncpg]==1.6.0) in the common workloads, run the way its docs say.

Schema: `pgq install` (PGDATABASE = the template). Enqueue: Queries.enqueue on an
asyncpg connection (its Quick Start), a scalar call for one job, lists for a batch.
Worker: `pgqueuer.run(factory)` ("run a worker from factory, as `pgq run` does, without
the CLI": the 1.6.0 CLI stops with "'str' object has no attribute 'name'" under typer
0.29) in its own process (`python -m bench.peers.pgqueuer_workloads DB OUTFILE VARIANT`),
one entrypoint "noop".

Variants: "defaults" (the headline row) passes nothing, so every setting is the one
`pgq run` and `pgqueuer.run` document: batch_size=10, max_concurrent_tasks=None (no cap),
dequeue_timeout 30 s, and the entrypoint's concurrency_limit=0 (no limit). "capped" is
the configuration earlier versions of this harness used (max_concurrent_tasks=4, which
requires batch_size <= 2, so batch_size=2), kept as an extra, labelled row.
The handler records time.time() per job id; the factory writes them to a JSON file when
the worker stops. Completed jobs leave the queue table.
"""
from __future__ import annotations

import asyncio
import functools
import json
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

VARIANTS = {
    "defaults": {},
    "capped": {"batch_size": 2, "max_concurrent_tasks": 4},
}
DOC = ("pgqueuer 1.6.0: `pgq run --help` and pgqueuer.run() (adapters/cli/supervisor.py: batch_size=10, "
       "max_concurrent_tasks=None), PgQueuer.entrypoint(concurrency_limit=0)")


class PgQueuerSystem(PgSystem):
    version = "1.6.0"
    remaining_sql = "SELECT count(*) FROM pgqueuer"
    any_left_sql = "SELECT count(*) FROM (SELECT 1 FROM pgqueuer LIMIT 1) AS x"
    doc = DOC

    def __init__(self, variant: str = "defaults"):
        self.variant = variant
        self.name = "pgqueuer" if variant == "defaults" else f"pgqueuer-{variant}"
        self.template = f"bench_tpl_{self.name.replace('-', '_')}"
        if variant == "defaults":
            self.label = "PgQueuer 1.6 (defaults)"
            self.config = ("pgqueuer.run(factory) with no options: batch_size 10, no max_concurrent_tasks, "
                           "entrypoint concurrency_limit 0, LISTEN/NOTIFY on")
        else:
            self.label = "PgQueuer 1.6 (capped: max_concurrent_tasks 4, batch_size 2; not its defaults)"
            self.config = "pgqueuer.run(factory, batch_size=2, max_concurrent_tasks=4): the harness's former setting"

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
        return [sys.executable, "-m", "bench.peers.pgqueuer_workloads", db, str(outfile), self.variant]


@asynccontextmanager
async def worker(db: str, outfile: str):
    """The worker factory: a PgQueuer with one no-op entrypoint (concurrency_limit at its default)."""
    connection = await asyncpg.connect(database=db)
    pgq = PgQueuer(AsyncpgDriver(connection))
    starts: dict[int, float] = {}

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        starts[job.id] = time.time()

    try:
        yield pgq
    finally:
        with open(outfile, "w") as f:
            json.dump(starts, f)
        await connection.close()


if __name__ == "__main__":
    asyncio.run(pgqueuer.run(functools.partial(worker, sys.argv[1], sys.argv[2]), **VARIANTS[sys.argv[3]]))
