"""broker_queue_stats() with many jobs finished in the last hour (not a test; workload `stats`).

N_FINISHED finished jobs (completed, failed, cancelled over 4 queues and 10 tenants) with finish times
spread over the last 55 minutes, written in one statement (the counters count them through the insert
trigger), merged once (as the runner's first stats call would) and vacuumed. Timed: the median of CALLS calls of
broker_queue_stats(), and of the query it replaced (every job finished in the last hour read from
broker_jobs_finished_idx), on the same table. The counters' price on the finish path: FINISHES jobs finished
one UPDATE statement each (as the finish functions do), with the counter triggers and without them.
"""
from __future__ import annotations

import statistics
import time

import psycopg

from . import common

N_FINISHED = common.env_int("BENCH_STATS_FINISHED", 1_000_000)
CALLS = common.env_int("BENCH_STATS_CALLS", 20)
FINISHES = common.env_int("BENCH_STATS_FINISHES", 20_000)
DB = "bench_stats"
# what broker_queue_stats() computed before the counters (its finished part)
OLD_QUERY = """SELECT j.job_queue, j.tenant_id, count(*) FILTER (WHERE j.complete_status = 2),
                      count(*) FILTER (WHERE j.complete_status = 3), count(*) FILTER (WHERE j.complete_status = 4)
                 FROM broker.broker_jobs AS j
                WHERE j.complete_status = ANY (ARRAY[2, 3, 4]::smallint[])
                  AND j.finished_at > statement_timestamp() - interval '1 hour'
                GROUP BY 1, 2"""
TRIGGERS = ("broker_jobs_count_finished_update_trg",)


def _median_ms(conn: psycopg.Connection, query: str) -> float:
    times = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        conn.execute(query).fetchall()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def _finish_one_by_one(conn: psycopg.Connection) -> float:
    conn.execute("DELETE FROM broker.broker_jobs WHERE complete_status = 0")
    conn.execute("""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
                    SELECT 'f', 'f', 'SELECT 1', 1 + i %% 4 FROM generate_series(1, %s) AS i""", (FINISHES,))
    ids = [r[0] for r in conn.execute("SELECT job_id FROM broker.broker_jobs WHERE complete_status = 0").fetchall()]
    t0 = time.perf_counter()
    with conn.transaction():
        for job_id in ids:
            conn.execute("UPDATE broker.broker_jobs SET complete_status = 2, finished_at = clock_timestamp() "
                         "WHERE job_id = %s", (job_id,))
    return (time.perf_counter() - t0) / len(ids) * 1e6


def run(template: str, runs: int) -> dict:
    common.create_db(DB, template)
    out: dict = {"finished_jobs": N_FINISHED, "calls": CALLS, "finishes": FINISHES, "runs": []}
    try:
        with psycopg.connect(dbname=DB, autocommit=True) as conn:
            conn.execute("""INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue,
                                                            complete_status, finished_at)
                            SELECT 't' || (i %% 10), 'done', 'done', 'SELECT 1', 1 + i %% 4, 2 + (i %% 3)::smallint,
                                   now() - random() * interval '55 minutes'
                              FROM generate_series(1, %s) AS i""", (N_FINISHED,))
            conn.execute("VACUUM ANALYZE broker.broker_jobs")
            conn.execute("SELECT broker._merge_finished_counts()")
            # the merge left the million deltas dead: vacuumed as autovacuum would (the table's scale factor is 1 %)
            conn.execute("VACUUM ANALYZE broker.broker_finished_count")
            counter_rows = conn.execute("SELECT count(*) FROM broker.broker_finished_count").fetchone()[0]
            for r in range(runs):
                row = {"stats_ms": _median_ms(conn, "SELECT * FROM broker.broker_queue_stats()"),
                       "old_query_ms": _median_ms(conn, OLD_QUERY),
                       "finish_us_with_counters": round(_finish_one_by_one(conn), 1)}
                for t in TRIGGERS:
                    conn.execute(f"ALTER TABLE broker.broker_jobs DISABLE TRIGGER {t}")
                row["finish_us_without"] = round(_finish_one_by_one(conn), 1)
                for t in TRIGGERS:
                    conn.execute(f"ALTER TABLE broker.broker_jobs ENABLE TRIGGER {t}")
                out["runs"].append(row)
                print(f"  run {r + 1} stats    {N_FINISHED} finished in the last hour ({counter_rows} counter rows): "
                      f"broker_queue_stats {row['stats_ms']} ms, the old query {row['old_query_ms']} ms; "
                      f"a finish {row['finish_us_with_counters']} us with the counters, "
                      f"{row['finish_us_without']} us without", flush=True)
    finally:
        common.drop_db(DB)
    out["counter_rows"] = counter_rows
    out["median"] = common.median_of(out["runs"])
    return out
