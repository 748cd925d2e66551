#!/usr/bin/env python3
"""Enqueue-to-start latency with an idle runner (not a test).

Starts pgbroker-runner with default settings on a fresh database, then enqueues
one `SELECT 1` job every ~10 ms (N jobs, one transaction each). Latency is the
job's started_at (the claim, server clock) minus t0, read on the client just
before the broker_add_job call (same machine, same clock). Prints p50/p95/p99
and writes bench/results/latency.json. Run with `make bench`.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

N = int(os.environ.get("BENCH_LATENCY_JOBS", "500"))
DB = "bench_latency"


def main() -> None:
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}"')
        admin.execute(f'CREATE DATABASE "{DB}"')
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgsql_broker")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runner = subprocess.Popen([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                               "--dsn", f"dbname={DB}", "--metrics-host", "127.0.0.1", "--metrics-port", str(port),
                               "--log-level", "warning"])
    try:
        time.sleep(2)  # registered, workers idle
        t0s = {}
        with psycopg.connect(dbname=DB, autocommit=True) as conn:
            for _ in range(N):
                t0 = time.time()
                job = conn.execute("SELECT job_id FROM broker.broker_add_job('ping', 'SELECT 1')").fetchone()[0]
                t0s[job] = t0
                time.sleep(0.01)
            deadline = time.time() + 60
            while conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2").fetchone()[0]:
                if time.time() > deadline:
                    sys.exit("jobs did not finish")
                time.sleep(0.1)
            rows = conn.execute("SELECT job_id, extract(epoch FROM started_at) FROM broker.broker_jobs").fetchall()
    finally:
        runner.terminate()
        runner.wait(30)
    lat = sorted((float(started) - t0s[job]) * 1000 for job, started in rows)
    pct = {p: lat[min(len(lat) - 1, int(round(p / 100 * len(lat))) - 1)] for p in (50, 95, 99)}
    print(f"enqueue -> start latency, {N} jobs one every ~10 ms, idle runner (default settings):")
    print(f"  p50 {pct[50]:.2f} ms   p95 {pct[95]:.2f} ms   p99 {pct[99]:.2f} ms   max {lat[-1]:.2f} ms   "
          f"mean {statistics.mean(lat):.2f} ms")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "latency.json").write_text(json.dumps({"jobs": N, "p50_ms": pct[50], "p95_ms": pct[95], "p99_ms": pct[99],
                                                  "max_ms": lat[-1]}, indent=2))
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{DB}" WITH (FORCE)')


if __name__ == "__main__":
    main()
