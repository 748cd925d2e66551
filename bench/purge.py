"""Retention cost: broker_purge_jobs with and without dependency edges (not a test; workload `purge`).

A table of N_FINISHED finished jobs (completed, failed, cancelled), of which N_PURGE are older than
the cut-off. Two cases, interleaved run by run: no edges at all, and N_EDGES edges spread over the
finished jobs. Each run purges the old ones in batches of BATCH (one transaction each, as the
runner does) and reports the seconds and the ratio with/without edges (the target: <= 2).
"""
from __future__ import annotations

import statistics
import time

import psycopg

from . import common

N_FINISHED = common.env_int("BENCH_PURGE_FINISHED", 200_000)
N_PURGE = common.env_int("BENCH_PURGE_JOBS", 10_000)
N_EDGES = common.env_int("BENCH_PURGE_EDGES", 100_000)
BATCH = common.env_int("BENCH_PURGE_BATCH", 1_000)
DB = "bench_purge"


def _fill(conn: psycopg.Connection, edges: int) -> None:
    conn.execute("TRUNCATE broker.broker_jobs, broker.broker_job_dependency, broker.broker_job_attempts, "
                 "broker.broker_job_actions RESTART IDENTITY")
    # the oldest N_PURGE are a year old, the rest recent
    conn.execute("""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
                    SELECT 'done', 'done', 'SELECT 1', 2 + (i %% 3),
                           CASE WHEN i <= %s THEN now() - interval '365 days' + i * interval '1 ms' ELSE now() END
                      FROM generate_series(1, %s) AS i""", (N_PURGE, N_FINISHED))
    if edges:
        # edges between finished jobs, written past the edge triggers (they accept pending jobs only):
        # what is measured is how the purge's cascade finds a job's edges
        with conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            conn.execute("""INSERT INTO broker.broker_job_dependency (job_id, depends_on_group)
                            SELECT 1 + (n * 7919) %% %s, 'g' || n FROM generate_series(1, %s) AS n""",
                         (N_FINISHED, edges))
    conn.execute("VACUUM ANALYZE broker.broker_jobs, broker.broker_job_dependency")


def _purge(conn: psycopg.Connection) -> float:
    t0 = time.perf_counter()
    total = 0
    while True:
        n = conn.execute("SELECT broker.broker_purge_jobs(interval '30 days', %s)", (BATCH,)).fetchone()[0]
        total += n
        if n == 0:
            break
    elapsed = time.perf_counter() - t0
    assert total == N_PURGE, f"purged {total}, expected {N_PURGE}"
    return elapsed


def run(template: str, runs: int) -> dict:
    common.create_db(DB, template)
    out: dict = {"finished_jobs": N_FINISHED, "purged_jobs": N_PURGE, "edges": N_EDGES, "batch": BATCH,
                 "runs": []}
    try:
        with psycopg.connect(dbname=DB, autocommit=True) as conn:
            for r in range(runs):
                row = {}
                for label, edges in (("no_edges", 0), ("with_edges", N_EDGES)):
                    _fill(conn, edges)
                    if edges:
                        row["edge_rows"] = conn.execute("SELECT count(*) FROM broker.broker_job_dependency").fetchone()[0]
                    row[label + "_s"] = round(_purge(conn), 3)
                row["ratio"] = round(row["with_edges_s"] / row["no_edges_s"], 2)
                out["runs"].append(row)
                print(f"  run {r + 1} purge    {N_PURGE} of {N_FINISHED} jobs: {row['no_edges_s']:.2f} s without edges, "
                      f"{row['with_edges_s']:.2f} s with {row['edge_rows']} edges (x{row['ratio']})", flush=True)
    finally:
        common.drop_db(DB)
    out["median_ratio"] = statistics.median(r["ratio"] for r in out["runs"])
    return out
