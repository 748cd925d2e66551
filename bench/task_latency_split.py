"""Benchmark (not a test): where a task's enqueue -> handler-start latency goes, for an idle task worker.
`python -m bench.task_latency_split` against the cluster named by PG* (`.ci/with-cluster`): BENCH_SPLIT_JOBS (300)
tasks enqueued one every 10 ms by `broker_add_task` (autocommit), one task worker (pgsql_broker.tasks.Worker at
its defaults, a no-op handler) in a process of its own. The worker's process records, with the same clock, when
its claim loop was woken, when each claim started and returned (and the tasks it took), and when each handler
started. Per task it prints the p50 and p90 of: the enqueue call (its commit's flush included), the NOTIFY's
arrival after the call returned (negative: before it), wake-up to claim, the claim's round trip, claim to handler,
and the whole. Figures in docs/benchmarks.md ("Tasks beside the peers").
"""
from __future__ import annotations

import asyncio
import bisect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psycopg

from . import common
from .latency_split import pct

JOBS = int(os.environ.get("BENCH_SPLIT_JOBS", "300"))
DB = "bench_task_latency_split"
PARTS = ("enqueue call", "return -> wake-up", "wake-up -> claim", "claim round trip", "claim -> handler", "total")


async def _work(db: str, outfile: str) -> None:
    """The worker's process: Worker() at its defaults, its claims and wake-ups timed."""
    from pgsql_broker.tasks import Worker
    worker = Worker(f"dbname={db}")
    seen: dict = {"wakes": [], "claims": [], "starts": {}}
    claim = worker._claim

    async def timed_claim() -> int:
        began = time.time()
        taken = await claim()
        if taken:
            seen["claims"].append((began, time.time(), [task.job_id for task, _ in list(worker._waiting)[-taken:]]))
        return taken
    worker._claim = timed_claim
    wake_set = worker._wake.set

    def timed_wake() -> None:
        seen["wakes"].append(time.time())
        wake_set()
    worker._wake.set = timed_wake

    @worker.task("noop")
    async def noop(args, ctx) -> None:
        seen["starts"][ctx.job_id] = time.time()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
    try:
        await worker.run()
    finally:
        with open(outfile, "w") as f:
            json.dump(seen, f)


async def _enqueue_all() -> dict[int, tuple[float, float]]:
    conn = await psycopg.AsyncConnection.connect(f"dbname={DB}", autocommit=True)
    times = {}
    try:
        for _ in range(JOBS):
            t0 = time.time()
            cur = await conn.execute("SELECT job_id FROM broker.broker_add_task('noop')")
            times[(await cur.fetchone())[0]] = (t0, time.time())
            await asyncio.sleep(0.01)
    finally:
        await conn.close()
    return times


def _parts(times: dict, seen: dict) -> list[tuple[float, ...]]:
    wakes = sorted(seen["wakes"])
    claims = {job_id: (began, ended) for began, ended, ids in seen["claims"] for job_id in ids}
    rows = []
    for job_id, (t0, returned) in times.items():
        start = seen["starts"].get(str(job_id))
        if start is None or job_id not in claims:
            continue
        began, ended = claims[job_id]
        i = bisect.bisect_right(wakes, began) - 1   # the wake-up this claim answered: the last before it
        wake = wakes[i] if i >= 0 and wakes[i] >= t0 else began
        rows.append((returned - t0, wake - returned, began - wake, ended - began, start - ended, start - t0))
    return rows


def main() -> None:
    common.create_broker_db(DB)
    with tempfile.TemporaryDirectory() as tmp:
        outfile = os.path.join(tmp, "worker.json")
        worker = subprocess.Popen([sys.executable, "-m", "bench.task_latency_split", "--worker", DB, outfile])
        try:
            with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
                while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                                   "AND query = 'LISTEN pgsql_broker_task'", (DB,)).fetchone()[0] == 0:
                    time.sleep(0.1)
                times = asyncio.run(_enqueue_all())
                while conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2").fetchone()[0]:
                    time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
        with open(outfile) as f:
            seen = json.load(f)
    rows = _parts(times, seen)
    print(f"{len(rows)} of {len(times)} tasks, ms: p50 / p90")
    for k, name in enumerate(PARTS):
        values = [row[k] * 1000 for row in rows]
        print(f"  {name:20s} {pct(values, 50):7.3f} / {pct(values, 90):7.3f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(_work(sys.argv[2], sys.argv[3]))
    else:
        main()
