"""Claim cost with a large backlog versus an empty table (pgsql_broker only).

Two databases on the same cluster:
  empty    only the ready jobs being claimed;
  backlog  1,000,000 finished, 100,000 blocked and 100,000 future jobs in the
           same queue, blocked and future ones at a HIGHER priority and older
           than the ready ones (the worst case for a claim that scans).
           BENCH_BACKLOG_SCALE (default 1) scales these three sizes for quick runs.
Each round adds BENCH_READY (5,000) ready jobs, VACUUM ANALYZEs, then pgbench
calls `SELECT * FROM broker.broker_get(1)` that many times (one claim per
transaction, one client). Rounds alternate empty/backlog; the result holds the
median latency of each and their ratio.
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
import time

import psycopg

from . import common

READY = common.env_int("BENCH_READY", 5000)
SCALE = common.env_float("BENCH_BACKLOG_SCALE", 1.0)
FINISHED, BLOCKED, FUTURE = (int(n * SCALE) for n in (1_000_000, 100_000, 100_000))
PGBENCH = common.PGBENCH


def load_backlog(dbname: str) -> float:
    """Bulk-load the backlog like a restore does: triggers off (session_replication_role = replica),
    so the dependency counters are written directly (one unfinished 'blocker' each)."""
    t0 = time.monotonic()
    common.sql(dbname,
               "SELECT broker.broker_add_job('blocker', 'SELECT 1', 2)",  # pending, in another queue
               "SET session_replication_role = replica",
               f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, complete_status,
                                                  attempts, started_at, finished_at)
                   SELECT 'done', 'done', 'SELECT 1', 1, 2 + (i % 20 = 0)::int, 1, now(), now()
                     FROM generate_series(1, {FINISHED}) AS i""",
               f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, job_priority, pending_deps)
                   SELECT 'blocked', 'blocked', 'SELECT 1', 1, 10, 1 FROM generate_series(1, {BLOCKED})""",
               """INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_group)
                  SELECT 'default', job_id, 'blocker' FROM broker.broker_jobs WHERE job_name = 'blocked'""",
               f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, job_priority, run_after)
                   SELECT 'future', 'future', 'SELECT 1', 1, 10, now() + interval '1 day'
                     FROM generate_series(1, {FUTURE})""")
    return time.monotonic() - t0


def one_round(dbname: str, script: str) -> dict:
    common.sql(dbname, f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
                           SELECT 'ready', 'ready', 'SELECT 1', 1 FROM generate_series(1, {READY})""",
               "VACUUM ANALYZE broker.broker_jobs", "CHECKPOINT")
    out = subprocess.run([PGBENCH, "-n", "-c", "1", "-t", str(READY), "-f", script, dbname],
                         check=True, capture_output=True, text=True).stdout
    latency = float(re.search(r"latency average = ([\d.]+) ms", out).group(1))
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    with psycopg.connect(dbname=dbname) as conn:
        claimed = conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'ready' AND complete_status = 1"
                               ).fetchone()[0]
        conn.execute("UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now(), lease_token = NULL, "
                     "lease_expires_at = NULL WHERE job_name = 'ready' AND complete_status = 1")
    if claimed != READY:
        raise RuntimeError(f"{dbname}: pgbench claimed {claimed} jobs, expected {READY}")
    return {"latency_ms": latency, "tps": tps}


def run(template: str, rounds: int) -> dict:
    """Rounds alternate empty/backlog; returns per-round values, medians and the ratio."""
    dbs = {"empty": "bench_claim_empty", "backlog": "bench_claim_backlog"}
    for db in dbs.values():
        common.create_db(db, template)
    try:
        load_s = load_backlog(dbs["backlog"])
        print(f"  backlog loaded in {load_s:.1f} s", flush=True)
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write("SELECT * FROM broker.broker_get(1);\n")
        runs: dict[str, list[dict]] = {"empty": [], "backlog": []}
        for r in range(rounds):
            for name, db in dbs.items():
                res = one_round(db, f.name)
                runs[name].append(res)
                print(f"  backlog round {r + 1} {name:8s} {res['latency_ms']:.3f} ms/claim  {res['tps']:.0f} claims/s",
                      flush=True)
        os.unlink(f.name)
    finally:
        for db in dbs.values():
            common.drop_db(db)
    med = {k: statistics.median(x["latency_ms"] for x in v) for k, v in runs.items()}
    return {"ready": READY, "finished": FINISHED, "blocked": BLOCKED, "future": FUTURE, "rounds": rounds,
            "runs": runs, "median_latency_ms": med, "ratio": med["backlog"] / med["empty"]}
