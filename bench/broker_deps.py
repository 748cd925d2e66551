"""Dependency costs of pgsql_broker (no runner; the calls a runner would make).

fan-in   completing a job that BENCH_DEPS_JOBS (10,000) pending jobs wait on by
         group: broker_get claims it (own transaction), then broker_run + COMMIT
         are timed (the first 1,000 dependents are released there, the rest
         deferred). Then the rest: broker_apply_deferred_releases(500), as
         the runner's maintenance calls it, one COMMIT each, until nothing is
         deferred, timed with the number of calls it took. Baseline: a job nobody waits on.
cycle    enqueueing a job into a 10,000-job graph: 10,000 pending jobs in group
         'graph', each waiting on the previous one by id, and a pending job
         waiting on group 'x'. Timed: broker_add_job of a job in group 'x' that
         depends on group 'graph' (so its cycle check walks the whole graph),
         in a transaction rolled back afterwards, median of 5 calls.
         Baseline: the same job in a group nobody waits on (no walk).
The graphs are bulk-loaded with the bookkeeping triggers off (as a restore
does), with the counters the triggers would have written; each run uses a
fresh database.
"""
from __future__ import annotations

import statistics
import time
import uuid

import psycopg

from . import common

N = common.env_int("BENCH_DEPS_JOBS", 10_000)
CALLS = 5


def _fresh(template: str) -> str:
    db = f"bench_deps_{uuid.uuid4().hex[:6]}"
    common.create_db(db, template)
    return db


def _load_dependents(db: str, n: int) -> None:
    common.sql(db,
               "SELECT broker.broker_add_job('blocker', 'SELECT 1', p_job_queue => 1, p_job_group => 'fan')",
               "SET session_replication_role = replica",
               f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, pending_deps)
                   SELECT 'dependent', 'dependent', 'SELECT 1', 2, 1 FROM generate_series(1, {n})""",
               """INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_group)
                  SELECT 'default', job_id, 'fan' FROM broker.broker_jobs WHERE job_name = 'dependent'""",
               "VACUUM ANALYZE broker.broker_jobs", "VACUUM ANALYZE broker.broker_job_dependency")


def complete_ms(template: str, dependents: int) -> tuple[float, float, int]:
    """(ms to complete the job, ms for the claims that release the deferred rest, how many claims)."""
    db = _fresh(template)
    try:
        _load_dependents(db, dependents)
        with psycopg.connect(dbname=db) as conn:
            job_id, token = conn.execute("SELECT job_id, lease_token FROM broker.broker_get(1)").fetchone()
            conn.commit()
            t0 = time.perf_counter()
            status = conn.execute("SELECT complete_status FROM broker.broker_run(%s, %s)", (job_id, token)).fetchone()[0]
            conn.commit()
            elapsed = (time.perf_counter() - t0) * 1000
            claims, t1 = 0, time.perf_counter()
            while conn.execute("SELECT EXISTS (SELECT 1 FROM broker.broker_deferred_release)").fetchone()[0]:
                conn.execute("SELECT broker.broker_apply_deferred_releases(500)")
                conn.commit()
                claims += 1
                if claims > dependents:
                    raise RuntimeError("fan-in: the deferred releases do not shrink")
            rest = (time.perf_counter() - t1) * 1000
            ready = conn.execute("SELECT count(*) FROM broker.broker_jobs "
                                 "WHERE job_name = 'dependent' AND pending_deps = 0").fetchone()[0]
        if status != 2 or ready != dependents:
            raise RuntimeError(f"fan-in: status {status}, {ready} of {dependents} dependents released")
        return elapsed, rest, claims
    finally:
        common.drop_db(db)


def _load_graph(db: str, n: int) -> None:
    common.sql(db,
               "SET session_replication_role = replica",
               f"""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, pending_deps)
                   SELECT 'node', 'graph', 'SELECT 1', 2, (g > 1)::int FROM generate_series(1, {n}) AS g""",
               """INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_job_id)
                  SELECT 'default', job_id, prev FROM (
                    SELECT job_id, lag(job_id) OVER (ORDER BY job_id) AS prev
                      FROM broker.broker_jobs WHERE job_group = 'graph') AS c WHERE prev IS NOT NULL""",
               "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
               "VALUES ('waiter', 'w', 'SELECT 1', 2)",
               "INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_group) "
               "SELECT 'default', job_id, 'x' FROM broker.broker_jobs WHERE job_name = 'waiter'",
               "VACUUM ANALYZE broker.broker_jobs", "VACUUM ANALYZE broker.broker_job_dependency")


def enqueue_into_graph_ms(template: str) -> dict:
    db = _fresh(template)
    try:
        _load_graph(db, N)
        out = {}
        with psycopg.connect(dbname=db) as conn:
            for label, group in (("walk", "x"), ("no_walk", "y")):
                times = []
                for _ in range(CALLS):
                    t0 = time.perf_counter()
                    conn.execute("SELECT broker.broker_add_job('new', 'SELECT 1', p_job_group => %s, "
                                 "p_depends_on_groups => ARRAY['graph'])", (group,))
                    times.append((time.perf_counter() - t0) * 1000)
                    conn.rollback()
                out[label] = statistics.median(times)
        return out
    finally:
        common.drop_db(db)


def run(template: str) -> dict:
    """One run: the four figures in ms."""
    graph = enqueue_into_graph_ms(template)
    fan_in, rest, claims = complete_ms(template, N)
    return {"complete_fan_in_ms": fan_in, "release_rest_ms": rest, "release_rest_claims": claims,
            "complete_no_dependents_ms": complete_ms(template, 0)[0],
            "enqueue_into_graph_ms": graph["walk"], "enqueue_no_walk_ms": graph["no_walk"], "jobs": N}
