"""The workloads every system runs the same way: drain, enqueue (single and batch), latency.

A system is an adapter (bench/broker_workloads.py, bench/peers/*.py) with:
  name                          key in tables and JSON; label, version, config, doc: what the
                                docs' system table says (how it is configured, where its defaults
                                are documented); skip: {workload: reason} for a workload it cannot run
  make_template()               create its template database (schema installed), once
  async open(db) / close()      a fresh database from the template, client connection(s)
  async enqueue_one() -> key    one job in its own transaction, returns the job's id
  batch_variants() -> [(label, async fn(size) | str reason)]   bulk enqueue paths
  async enqueue_runs(...)       the enqueue workload (default: enqueue_one and batch_variants in this
                                process; the Node peers time the same loops in their own client)
  async latency_enqueues(n)     {key: t0}: one job every ~10 ms (default: enqueue_one here)
  async preload(n)              enqueue n no-op jobs as fast as the system allows
  async remaining() -> int      jobs not completed yet
  worker_argv(db, outfile)      the worker process (its documented defaults unless the label says otherwise)
  async start_times(outfile) -> {key: epoch seconds the job started}
"""
from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import psycopg

from . import common

N_DRAIN = common.env_int("BENCH_DRAIN_JOBS", 20_000)
N_SINGLE = common.env_int("BENCH_SINGLE_JOBS", 2_000)
N_BATCHES = common.env_int("BENCH_BATCHES", 10)
BATCH = 1_000
N_LATENCY = common.env_int("BENCH_LATENCY_JOBS", 500)
TIMEOUT = common.env_float("BENCH_TIMEOUT_SEC", 600)


def _db(system) -> str:
    return f"bench_{system.name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"


async def with_db(system, body):
    db = _db(system)
    await system.open(db)
    try:
        return await body(db)
    finally:
        await system.close()
        common.drop_db(db)


async def drain(system) -> dict:
    """N jobs enqueued before the worker starts; jobs/s from the first completion to the last."""
    async def body(db):
        await system.preload(N_DRAIN)
        await system.analyze()
        outfile = common.RESULTS / f".{db}.starts.json"
        worker = common.Worker(system.worker_argv(db, outfile), cwd=common.ROOT)
        try:
            return await common.timed_drain(system.remaining, N_DRAIN, worker, TIMEOUT, system.any_left)
        finally:
            worker.stop()
            outfile.unlink(missing_ok=True)
    return await with_db(system, body)


async def enqueue(system) -> dict:
    """Single: N_SINGLE jobs, one transaction each. Batch: N_BATCHES batches of 1,000, one call each."""
    async def body(db):
        return await system.enqueue_runs(N_SINGLE, N_BATCHES, BATCH)
    return await with_db(system, body)


async def latency(system) -> dict:
    """Idle worker; one job every ~10 ms; t0 just before the enqueue call, start as the system records it."""
    async def body(db):
        outfile = common.RESULTS / f".{db}.starts.json"
        worker = common.Worker(system.worker_argv(db, outfile), cwd=common.ROOT)
        try:
            # warm-up: the worker is up and idle once it has run one job
            await system.enqueue_one()
            await common.wait_until(lambda: _none_left(system), TIMEOUT, f"{system.name} worker to start", 0.05, worker)
            t0s = await system.latency_enqueues(N_LATENCY)
            await common.wait_until(lambda: _none_left(system), TIMEOUT, f"{system.name} latency jobs", 0.05, worker)
        finally:
            worker.stop()
        try:
            return common.latency_result(t0s, await system.start_times(outfile))
        finally:
            Path(outfile).unlink(missing_ok=True)
    return await with_db(system, body)


async def _none_left(system) -> bool:
    return await system.remaining() == 0


WORKLOADS = {"drain": drain, "enqueue": enqueue, "latency": latency}


class PgSystem:
    """Base of the adapters: a template database and one autocommit psycopg connection to observe it."""

    name = "?"
    label = "?"
    version = "?"
    config = "?"
    doc = "?"
    template = "?"
    skip: dict = {}
    remaining_sql = "?"  # how many jobs are unfinished
    any_left_sql = "?"   # 1 while a job is unfinished, else 0: one index probe, not a count (see timed_drain)

    async def open(self, db: str) -> None:
        common.create_db(db, self.template)
        self.db = db
        self.conn = await psycopg.AsyncConnection.connect(dbname=db, autocommit=True)

    async def close(self) -> None:
        await self.conn.close()

    async def analyze(self) -> None:
        await self.conn.execute("ANALYZE")

    async def remaining(self) -> int:
        return (await (await self.conn.execute(self.remaining_sql)).fetchone())[0]

    async def any_left(self) -> int:
        return (await (await self.conn.execute(self.any_left_sql)).fetchone())[0]

    def batch_variants(self) -> list:
        return [("batch 1000", self.enqueue_batch)]

    def info(self) -> dict:
        return {"label": self.label, "version": self.version, "config": self.config, "doc": self.doc}

    async def enqueue_runs(self, n_single: int, n_batches: int, batch: int) -> dict:
        out = {"single": await common.timed_loop(self.enqueue_one, n_single)}
        for label, fn in self.batch_variants():
            if isinstance(fn, str):
                out[label] = fn
            else:
                out[label] = await common.timed_loop(lambda: fn(batch), n_batches, batch)
        return out

    async def latency_enqueues(self, n: int) -> dict:
        return await common.latency_loop(self.enqueue_one, n)

    async def enqueue_batch(self, size: int) -> None:
        raise NotImplementedError

    def install_argv(self) -> list[str]:
        """The peer's own schema installer, run with PGDATABASE = the template."""
        raise NotImplementedError

    def make_template(self) -> None:
        common.create_db(self.template)
        subprocess.run(self.install_argv(), check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "PGDATABASE": self.template})

    async def preload(self, n: int) -> None:
        for start in range(0, n, BATCH):
            await self.enqueue_batch(min(BATCH, n - start))

    async def start_times(self, outfile) -> dict:
        """The peers' workers write {job id: time.time() at the job's start} to outfile on exit."""
        return {int(k): v for k, v in json.loads(Path(outfile).read_text()).items()}
