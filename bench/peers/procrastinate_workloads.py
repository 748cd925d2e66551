"""Procrastinate (pip procrastinate==3.10.0) in the common workloads, run the way its docs say.

Schema: `procrastinate schema --apply`. Enqueue: `defer_async()` for one job (its own
transaction) and `batch_defer_async(*1000 kwargs)` for a batch, on an App with a
PsycopgConnector. Worker: `procrastinate --app=bench.peers.procrastinate_workloads.app
worker` -- one process, every setting at its default (worker.py: WORKER_CONCURRENCY = 1,
"maximum number of parallel jobs"; listen_notify=True; delete_jobs=None, so jobs are kept
after completion). The extra, labelled variant "c4" adds `--concurrency=4`, the setting
earlier versions of this harness used. The task records time.time() per
job id; the worker process writes them to a JSON file when it exits. The database
comes from PGDATABASE (libpq environment), like every other connection here.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import time

from procrastinate import App, JobContext, PsycopgConnector

from ..workloads import PgSystem

APP = "bench.peers.procrastinate_workloads.app"
STARTS: dict[int, float] = {}

app = App(connector=PsycopgConnector(conninfo=""))  # libpq environment (PGHOST, PGDATABASE, ...)


@app.task(name="noop", pass_context=True)
async def noop(context: JobContext) -> None:
    STARTS[context.job.id] = time.time()


def _write_starts() -> None:
    path = os.environ.get("BENCH_STARTS_FILE")
    if path and STARTS:
        with open(path, "w") as f:
            json.dump(STARTS, f)


atexit.register(_write_starts)


class ProcrastinateSystem(PgSystem):
    version = "3.10.0"
    doc = ("procrastinate 3.10.0: `procrastinate worker --help` (-c/--concurrency, env WORKER_CONCURRENCY) "
           "and procrastinate/worker.py (WORKER_CONCURRENCY = 1, listen_notify=True, delete_jobs=None)")
    remaining_sql = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
    any_left_sql = "SELECT count(*) FROM (SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing') LIMIT 1) AS x"

    def __init__(self, concurrency: int | None = None):
        self.concurrency = concurrency
        self.name = "procrastinate" if concurrency is None else f"procrastinate-c{concurrency}"
        self.template = f"bench_tpl_{self.name.replace('-', '_')}"
        if concurrency is None:
            self.label = "Procrastinate 3.10 (defaults)"
            self.config = "procrastinate worker: concurrency 1, LISTEN/NOTIFY on, finished jobs kept"
        else:
            self.label = f"Procrastinate 3.10 (--concurrency={concurrency}; not its defaults)"
            self.config = f"procrastinate worker --concurrency={concurrency}: the harness's former setting"

    def install_argv(self) -> list[str]:
        return [sys.executable, "-m", "procrastinate", f"--app={APP}", "schema", "--apply"]

    async def open(self, db: str) -> None:
        await super().open(db)
        self.replaced = app.replace_connector(PsycopgConnector(conninfo=f"dbname={db}"))
        self.replaced.__enter__()
        await app.open_async()

    async def close(self) -> None:
        await app.close_async()
        self.replaced.__exit__(None, None, None)
        await super().close()

    async def enqueue_one(self) -> int:
        return await noop.defer_async()

    async def enqueue_batch(self, size: int) -> None:
        await noop.batch_defer_async(*({} for _ in range(size)))

    def worker_argv(self, db: str, outfile) -> list[str]:
        return ["env", f"PGDATABASE={db}", f"BENCH_STARTS_FILE={outfile}", sys.executable, "-m", "procrastinate",
                f"--app={APP}", "--log-level=warning", "worker"] + (
                    [f"--concurrency={self.concurrency}"] if self.concurrency else [])
