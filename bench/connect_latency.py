"""Benchmark (not a test): enqueue -> claim of a job in an idle database, with a warm worker connection and with
a cold one (the runner closed its worker connections at idle and must connect first).
`python -m bench.connect_latency` against the cluster named by PG* (`.ci/with-cluster`).

The latency is the job's claim time minus its enqueue time, both on the server's clock
(broker_jobs.started_at - created_at); the runner's own broker_connect_seconds histogram gives the connect.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

ROLES_SQL = (Path(__file__).resolve().parent.parent / "sql" / "roles.sql").read_text()
TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))


def runner_connections(conn, db: str) -> int:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name LIKE 'lat:%%'",
                        (db,)).fetchone()[0]


def trial(conn, admin, db: str, cold: bool) -> float:
    if cold:  # wait until the runner holds its session connection only
        while runner_connections(admin, db) != 1:
            time.sleep(0.05)
    job = conn.execute("SELECT job_id FROM broker.broker_add_job('lat', 'SELECT 1')").fetchone()[0]
    while True:
        row = conn.execute("SELECT complete_status, extract(epoch FROM started_at - created_at) FROM broker.broker_jobs "
                           "WHERE job_id = %s", (job,)).fetchone()
        if row[0] == 2:
            return float(row[1]) * 1000
        time.sleep(0.01)


def main() -> None:
    db = f"lat_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db}"')
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgsql_broker")
        conn.execute(ROLES_SQL)
    dsn = f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={os.environ['PGUSER']}"
    results = {}
    for label, idle in (("warm", "600"), ("cold", "0.2")):
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                                 "--dsn", dsn, "--allow-privileged-login", "--no-metrics", "--name", "lat",
                                 "--worker-idle-timeout-sec", idle], stdout=log, stderr=subprocess.STDOUT)
        try:
            with psycopg.connect(dbname=db, autocommit=True) as conn, \
                    psycopg.connect(dbname="postgres", autocommit=True) as admin:
                trial(conn, admin, db, False)  # (the first job: the runner is up)
                samples = sorted(trial(conn, admin, db, label == "cold") for _ in range(TRIALS))
                results[label] = samples
        finally:
            proc.terminate()
            proc.wait(30)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{db}" WITH (FORCE)')
    for label, samples in results.items():
        print(f"{label}: enqueue -> claim ms over {TRIALS} jobs: p50 {statistics.median(samples):.1f}, "
              f"p90 {samples[int(len(samples) * 0.9) - 1]:.1f}, max {samples[-1]:.1f}")


if __name__ == "__main__":
    main()
