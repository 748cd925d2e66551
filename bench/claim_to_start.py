"""Benchmark (not a test): from a claim to the job's own SQL, step by step, with the runner's own statements.
`python -m bench.claim_to_start` against the cluster named by PG* (`.ci/with-cluster`). BENCH_CLAIM_START_JOBS
(300) times, on one connection as the runner's worker uses it: one job enqueued (its SQL records its
clock_timestamp() as its output), then the runner's claim (queries.CLAIM_RELAXED, its own transaction, its commit
not waiting for the WAL flush) and the runner's transaction of that job (queries.RUN_TRANSACTION). Per job: the
claim's round trip on the client's clock (its statements and its commit), in alternate rounds the same claim
with its commit flushed (queries.CLAIM under synchronous_commit on, as the runner sent it before: the difference
is the flush), and from the claim's return to the job's SQL (the run message up to the job's own clock). Client and server share the machine's clock. Then, with track_functions = all on the same connection, the
broker's functions that took the most time per job (pg_stat_user_functions: self and total ms a call). Figures in
docs/benchmarks.md ("Where enqueue-to-start latency goes").
"""
from __future__ import annotations

import os
import time
import uuid

import psycopg

from pgsql_broker.run import queries

from . import common
from .latency_split import pct

JOBS = common.env_int("BENCH_CLAIM_START_JOBS", 300)
DB = "bench_claim_to_start"
START_SQL = "SELECT broker.broker_set_output(extract(epoch FROM clock_timestamp())::text)"


def _one(conn: psycopg.Connection, relaxed: bool) -> tuple[float, float]:
    """(the claim's round trip, from its return to the job's SQL), in ms."""
    conn.execute("SELECT broker.broker_add_job('j', %s)", (START_SQL,))
    params = {"queue": 1, "instance": None, "lease": 60, "batch": 1, "budget": "200 milliseconds", "alone": False,
              "token": str(uuid.uuid4())}
    t0 = time.time()
    cur = psycopg.ClientCursor(conn)   # (as the runner sends it: one message, bound client-side)
    cur.execute(queries.CLAIM_RELAXED if relaxed else queries.CLAIM, params)
    while not cur.pgresult.nfields:   # (past the SET's result)
        cur.nextset()
    job = cur.fetchone()
    t1 = time.time()
    # (several statements in one message, bound client-side, as the runner sends them)
    psycopg.ClientCursor(conn).execute(queries.RUN_TRANSACTION, {"jobs": [job[0]], "tokens": [job[7]], "budget": None})
    own = conn.execute("SELECT output::float8 FROM broker.broker_job_attempts WHERE job_id = %s", (job[0],)).fetchone()[0]
    return (t1 - t0) * 1000, (own - t1) * 1000


def main() -> None:
    common.create_broker_db(DB)
    try:
        with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
            conn.execute("SELECT broker.broker_create_executor(current_user)")
            for _ in range(20):   # (warm: plans, catalog caches)
                _one(conn, False)
            on, off, after = [], [], []
            for i in range(JOBS):
                claim, rest = _one(conn, relaxed=bool(i % 2))
                (off if i % 2 else on).append(claim)
                after.append(rest)
            conn.execute("SET track_functions = 'all'")
            conn.execute("SELECT pg_stat_reset()")
            for _ in range(JOBS):
                _one(conn, relaxed=False)
        time.sleep(1)   # (the session's function counts are flushed when it ends)
        with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
            functions = conn.execute("""SELECT funcname, calls, total_time / calls, self_time / calls
                                          FROM pg_stat_user_functions WHERE calls > 0
                                         ORDER BY self_time DESC LIMIT 15""").fetchall()
    finally:
        common.drop_db(DB)
    print(f"{JOBS} jobs, load {os.getloadavg()[0]:.1f}")
    for name, values in (("claim round trip, its commit flushed", on),
                         ("claim round trip, as the runner sends it", off),
                         ("claim returned -> the job's SQL", after)):
        print(f"{name:42s} p50 {pct(values, 50):7.2f}  p90 {pct(values, 90):7.2f}  p99 {pct(values, 99):7.2f} ms")
    print("functions, most self time first (ms a call): name, calls, total, self")
    for name, calls, total, own in functions:
        print(f"  {name:32s} {calls:6d} {total:7.3f} {own:7.3f}")


if __name__ == "__main__":
    main()
