"""Benchmark (not a test): where the drain spends its database time.
`python -m bench.drain_profile` against the cluster named by PG* (`.ci/with-cluster`): BENCH_PROFILE_JOBS
(20,000) `SELECT 1` jobs over 4 queues, drained by `pgbroker-runner` at its defaults with the server's
track_functions = all; prints the drain rate (first to last completion) and the functions with the most self
time (pg_stat_user_functions), per call and per job. Function tracking adds its own cost: compare shares, not
the rate with other runs. Figures in docs/benchmarks.md ("Where the drain spends its database time").
"""
from __future__ import annotations

import os
import time

import psycopg

from . import common

JOBS = int(os.environ.get("BENCH_PROFILE_JOBS", "20000"))
DB = "bench_drain_profile"
TOP = """SELECT schemaname || '.' || funcname, calls, self_time, total_time FROM pg_stat_user_functions
          ORDER BY self_time DESC LIMIT 20"""


def main() -> None:
    common.create_broker_db(DB)
    common.sql("postgres", "ALTER SYSTEM SET track_functions = 'all'", "SELECT pg_reload_conf()")
    try:
        with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
            conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
                         "SELECT 'drain', 'drain', 'SELECT 1', 1 + g %% 4 FROM generate_series(1, %s) AS g", (JOBS,))
            conn.execute("ANALYZE broker.broker_jobs")
            conn.execute("SELECT pg_stat_reset()")
            common.drain_with_runner(conn, DB)
            first, last = conn.execute("SELECT extract(epoch FROM min(finished_at))::float8, "
                                       "extract(epoch FROM max(finished_at))::float8 FROM broker.broker_jobs").fetchone()
            print(f"drain: {JOBS / (last - first):,.0f} jobs/s (first to last completion), load "
                  f"{os.getloadavg()[0]:.1f}")
            time.sleep(1)  # (the backends' function statistics reach the collector)
            print(f"{'function':45s} {'calls':>8s} {'self ms':>9s} {'total ms':>9s} {'self µs/job':>12s}")
            for name, calls, self_ms, total_ms in conn.execute(TOP):
                print(f"{name:45s} {calls:8d} {self_ms:9.0f} {total_ms:9.0f} {self_ms * 1000 / JOBS:12.1f}")
    finally:
        common.sql("postgres", "ALTER SYSTEM RESET track_functions", "SELECT pg_reload_conf()")
        common.drop_db(DB)


if __name__ == "__main__":
    main()
