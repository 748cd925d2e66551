"""Benchmark (not a test): where enqueue -> start latency goes, for an idle runner.
`python -m bench.latency_split` against the cluster named by PG* (`.ci/with-cluster`): BENCH_SPLIT_JOBS (300)
jobs enqueued one every 10 ms by `broker_add_job` (autocommit), one `pgbroker-runner` at its defaults. Per job:
the client's clock before the call (t0) and when it returned (t1), the row's created_at (the enqueue's
transaction start), started_at (the claim) and the job's own start (its SQL records its clock_timestamp() as its
output, as the peer page's latency workload reads it). Client and server share the machine's clock. Prints p50,
p90 and p99 of each part. Figures in docs/benchmarks.md ("Where enqueue-to-start latency goes").
"""
from __future__ import annotations

import asyncio
import os
import time

import psycopg

from . import common

JOBS = int(os.environ.get("BENCH_SPLIT_JOBS", "300"))
DB = "bench_latency_split"
# the job's SQL: its own clock when it runs, as its output (broker_job_attempts.output)
START_SQL = "SELECT broker.broker_set_output(extract(epoch FROM clock_timestamp())::text)"


def pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def enqueue_all() -> dict[int, tuple[float, float]]:
    conn = await psycopg.AsyncConnection.connect(f"dbname={DB}", autocommit=True)
    times = {}
    try:
        for i in range(JOBS):
            t0 = time.time()
            cur = await conn.execute("SELECT job_id FROM broker.broker_add_job(%s, %s)", (f"j{i}", START_SQL))
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
                while conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2").fetchone()[0]:
                    time.sleep(0.1)
            finally:
                runner.terminate()
                runner.wait(60)
            rows = conn.execute("SELECT j.job_id, extract(epoch FROM j.created_at)::float8, "
                                "extract(epoch FROM j.started_at)::float8, a.output::float8 "
                                "FROM broker.broker_jobs AS j JOIN broker.broker_job_attempts AS a USING (job_id)").fetchall()
    finally:
        common.drop_db(DB)
    parts: dict[str, list[float]] = {"call -> created_at": [], "created_at -> call returned": [],
                                     "call returned -> claim": [], "claim -> the job's SQL": [],
                                     "call -> claim": [], "call -> the job's SQL (the latency)": []}
    for job_id, created, started, own in rows:
        t0, t1 = times[job_id]
        parts["call -> created_at"].append((created - t0) * 1000)
        parts["created_at -> call returned"].append((t1 - created) * 1000)
        parts["call returned -> claim"].append((started - t1) * 1000)
        parts["claim -> the job's SQL"].append((own - started) * 1000)
        parts["call -> claim"].append((started - t0) * 1000)
        parts["call -> the job's SQL (the latency)"].append((own - t0) * 1000)
    print(f"{len(rows)} jobs, load {os.getloadavg()[0]:.1f}")
    for name, values in parts.items():
        print(f"{name:36s} p50 {pct(values, 50):7.2f}  p90 {pct(values, 90):7.2f}  p99 {pct(values, 99):7.2f} ms")


if __name__ == "__main__":
    main()
