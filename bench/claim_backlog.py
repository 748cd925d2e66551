#!/usr/bin/env python3
"""Claim cost with a large backlog versus an empty table (not a test).

Two databases on the same throwaway cluster:
  empty    only the ready jobs being claimed;
  backlog  1,000,000 finished, 100,000 blocked and 100,000 future jobs in the
           same queue, blocked and future ones at a HIGHER priority and older
           than the ready ones (the worst case for a claim that scans).
Each run adds READY ready jobs, VACUUM ANALYZEs, then pgbench calls
`SELECT * FROM broker.broker_get(1)` READY times (one claim per transaction,
one client). Runs alternate empty/backlog ROUNDS times; the table shows the
median latency of each and their ratio. Results also go to
bench/results/claim_backlog.json.

Run with `make bench` (it starts its own cluster and sets PG*).
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

READY = int(os.environ.get("BENCH_READY", "5000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
FINISHED, BLOCKED, FUTURE = 1_000_000, 100_000, 100_000
PGBENCH = os.path.join(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"), "pgbench")


def sql(dbname: str, *statements: str) -> None:
    with psycopg.connect(dbname=dbname, autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


def create(dbname: str) -> None:
    sql("postgres", f'DROP DATABASE IF EXISTS "{dbname}"', f'CREATE DATABASE "{dbname}"')
    sql(dbname, "CREATE EXTENSION pgsql_broker")


def load_backlog(dbname: str) -> None:
    """Bulk-load the backlog like a restore does: triggers off (session_replication_role = replica),
    so the dependency counters are written directly (one unfinished 'blocker' each)."""
    t0 = time.monotonic()
    sql(dbname,
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
            SELECT 'future', 'future', 'SELECT 1', 1, 10, now() + interval '1 day' FROM generate_series(1, {FUTURE})""")
    print(f"  backlog loaded in {time.monotonic() - t0:.1f} s", flush=True)


def one_run(dbname: str, script: str) -> dict:
    sql(dbname, f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
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
        sys.exit(f"{dbname}: pgbench claimed {claimed} jobs, expected {READY}")
    return {"latency_ms": latency, "tps": tps}


def main() -> None:
    with psycopg.connect(dbname="postgres") as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        settings = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name IN "
                                     "('shared_buffers', 'synchronous_commit', 'fsync')").fetchall())
    print(f"PostgreSQL {version}; {os.cpu_count()} cores; {settings}", flush=True)
    create("bench_empty")
    create("bench_backlog")
    load_backlog("bench_backlog")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write("SELECT * FROM broker.broker_get(1);\n")
        script = f.name
    runs: dict[str, list[dict]] = {"empty": [], "backlog": []}
    for r in range(ROUNDS):
        for name in ("empty", "backlog"):
            res = one_run(f"bench_{name}", script)
            runs[name].append(res)
            print(f"  round {r + 1} {name:8s} {res['latency_ms']:.3f} ms/claim  {res['tps']:.0f} claims/s", flush=True)
    med = {k: statistics.median(x["latency_ms"] for x in v) for k, v in runs.items()}
    ratio = med["backlog"] / med["empty"]
    print()
    print(f"| table | broker_get latency (median of {ROUNDS}) |")
    print("|---|---|")
    print(f"| empty (only {READY:,} ready jobs) | {med['empty']:.3f} ms |")
    print(f"| {FINISHED:,} finished + {BLOCKED:,} blocked + {FUTURE:,} future | {med['backlog']:.3f} ms |")
    print(f"| ratio backlog / empty | {ratio:.2f} (target < 1.5) |")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "claim_backlog.json").write_text(json.dumps(
        {"server_version": version, "settings": settings, "cpu_count": os.cpu_count(), "ready": READY, "rounds": ROUNDS, "runs": runs,
         "median_latency_ms": med, "ratio": ratio}, indent=2))
    for name in ("bench_empty", "bench_backlog"):
        sql("postgres", f'DROP DATABASE "{name}"')


if __name__ == "__main__":
    main()
