"""Benchmark (not a test): where enqueue -> start latency goes, for an idle runner.
`python -m bench.latency_split` against the cluster named by PG* (`.ci/with-cluster`): BENCH_SPLIT_JOBS (300)
jobs enqueued one every 10 ms by `broker_add_job` (autocommit), one `pgbroker-runner` at its defaults. Per job:
the client's clock before the call (t0) and when it returned (t1), the row's created_at (the enqueue's
transaction start) and started_at (the claim). Client and server share the machine's clock. Prints p50, p90
and p99 of each part. Figures in docs/benchmarks.md ("Where enqueue-to-start latency goes").
"""
from __future__ import annotations

import asyncio
import os
import time

import psycopg

from . import common

JOBS = int(os.environ.get("BENCH_SPLIT_JOBS", "300"))
DB = "bench_latency_split"


def pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def enqueue_all() -> dict[int, tuple[float, float]]:
    conn = await psycopg.AsyncConnection.connect(f"dbname={DB}", autocommit=True)
    times = {}
    try:
        for i in range(JOBS):
            t0 = time.time()
            cur = await conn.execute("SELECT job_id FROM broker.broker_add_job(%s, 'SELECT 1')", (f"j{i}",))
            times[(await cur.fetchone())[0]] = (t0, time.time())
            await asyncio.sleep(0.01)
    finally:
        await conn.close()
    return times


def main() -> None:
    common.create_broker_db(DB)
    try:
        with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
            runner = common.start_runner(DB)
            try:
                while conn.execute("SELECT count(*) FROM broker.broker_queueinstance WHERE status = 'active'").fetchone()[0] == 0:
                    time.sleep(0.1)
                times = asyncio.run(enqueue_all())
                while conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE started_at IS NULL").fetchone()[0]:
                    time.sleep(0.1)
            finally:
                runner.terminate()
                runner.wait(60)
            rows = conn.execute("SELECT job_id, extract(epoch FROM created_at)::float8, "
                                "extract(epoch FROM started_at)::float8 FROM broker.broker_jobs").fetchall()
    finally:
        common.drop_db(DB)
    parts: dict[str, list[float]] = {"call -> created_at": [], "created_at -> call returned": [],
                                     "call returned -> claim": [], "call -> claim (the latency)": []}
    for job_id, created, started in rows:
        t0, t1 = times[job_id]
        parts["call -> created_at"].append((created - t0) * 1000)
        parts["created_at -> call returned"].append((t1 - created) * 1000)
        parts["call returned -> claim"].append((started - t1) * 1000)
        parts["call -> claim (the latency)"].append((started - t0) * 1000)
    print(f"{len(rows)} jobs, load {os.getloadavg()[0]:.1f}")
    for name, values in parts.items():
        print(f"{name:30s} p50 {pct(values, 50):7.2f}  p90 {pct(values, 90):7.2f}  p99 {pct(values, 99):7.2f} ms")


if __name__ == "__main__":
    main()
