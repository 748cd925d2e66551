"""Flow control as users meet it (issue 33): what a tenant's flood does to another tenant's jobs, the share of
weighted tenants, a cap and a rate on a key, and what jobs a claim cannot take cost another tenant's claims.

Each part on a fresh database of the throwaway cluster (.ci/with-cluster), the runner at its defaults except
where named:
- flood: tenant a enqueues 20,000 no-op jobs (at priority 100, then, in a second database, at priority 0), tenant
  b 50 at priority 0, then the runner starts; how many of a's completed before b's last (by a sequence the jobs
  write);
- weights: a weighs 3, b 1, 6,000 jobs each; a's share of the first 4,000 completions;
- cap: 12 jobs of key k2 (cap 2) each sleeping 0.5 s, and 10 unkeyed ones after them, on 6 workers; the most k2
  jobs running at once (from the database clock around each run) and whether the unkeyed ones finished first;
- rate: 40 jobs of key r10 (10 a second, burst 10) on 4 workers; seconds from the first start to the last;
- claim cost: a victim tenant's claims of one job (autocommit, as the runner's), mean and p99 milliseconds and
  the buffers of one claim, with none of the attacker's jobs and with 20,000 of them at priorities of their own
  above the victim's: dated 'infinity', in a queue the attacker paused for itself, held by a key's cap (after the
  claims that park them), and locked by the attacker's open transaction (5,000 rows).
A bench, not a test: it reports, it asserts nothing.

    .ci/with-cluster .venv/bin/python -m bench.flow
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import psycopg

from .common import create_broker_db, env_int, machine_facts, start_runner, write_json

DB = "bench_flow"


def _wait(conn: psycopg.Connection, query: str, target: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute(query).fetchone()[0] < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {query}")
        time.sleep(0.05)


def _fresh(conn_setup: list[str]) -> psycopg.Connection:
    create_broker_db(DB)
    conn = psycopg.connect(dbname=DB, autocommit=True)
    conn.execute("CREATE TABLE done (n bigserial PRIMARY KEY, tenant text NOT NULL)")
    conn.execute("CREATE TABLE spans (job text PRIMARY KEY, key text, started timestamptz NOT NULL, ended timestamptz)")
    for s in conn_setup:
        conn.execute(s)
    return conn


def _enqueue(conn: psycopg.Connection, tenant: str, jobs: list[dict]) -> None:
    for i in range(0, len(jobs), 5000):
        conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s::jsonb, p_tenant_id => %s)",
                     (json.dumps(jobs[i:i + 5000]), tenant))


def _noop(tenant: str, n: int, priority: int) -> list[dict]:
    return [{"job_name": f"{tenant} {i}", "job_priority": priority,
             "execute_str": f"INSERT INTO done (tenant) VALUES ('{tenant}')"} for i in range(n)]


def _span(name: str, key: str | None, seconds: float) -> dict:
    body = (f"BEGIN INSERT INTO spans VALUES ('{name}', {repr(key) if key else 'NULL'}, clock_timestamp()); "
            f"PERFORM pg_sleep({seconds}); UPDATE spans SET ended = clock_timestamp() WHERE job = '{name}'; END")
    return {"job_name": name, "job_language": "plpgsql", "execute_str": body,
            **({"concurrency_key": key} if key else {})}


def _runner(extra: tuple[str, ...] = ()):
    import subprocess
    return subprocess.Popen([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                             "--dsn", f"dbname={DB}", "--allow-privileged-login", "--log-level", "warning",
                             "--metrics-port", "0", *extra], stdout=subprocess.DEVNULL)


def _stop(runner) -> None:
    runner.terminate()
    runner.wait(60)


def flood(priority: int) -> dict:
    conn = _fresh([])
    _enqueue(conn, "a", _noop("a", 20000, priority))
    _enqueue(conn, "b", _noop("b", 50, 0))
    runner = start_runner(DB)
    try:
        _wait(conn, "SELECT count(*) FROM done WHERE tenant = 'b'", 50)
    finally:
        _stop(runner)
    last_b = conn.execute("SELECT max(n) FROM done WHERE tenant = 'b'").fetchone()[0]
    before = conn.execute("SELECT count(*) FROM done WHERE tenant = 'a' AND n < %s", (last_b,)).fetchone()[0]
    conn.close()
    return {"a_priority": priority, "a_completed_before_b_last": before}


def weights() -> dict:
    conn = _fresh(["SELECT broker.broker_set_tenant_weight('a', 3)"])
    _enqueue(conn, "a", _noop("a", 6000, 0))
    _enqueue(conn, "b", _noop("b", 6000, 0))
    runner = start_runner(DB)
    try:
        _wait(conn, "SELECT count(*) FROM done", 4000)
    finally:
        _stop(runner)
    share = conn.execute("SELECT avg((tenant = 'a')::int) FROM (SELECT tenant FROM done ORDER BY n LIMIT 4000) AS f"
                         ).fetchone()[0]
    conn.close()
    return {"a_share_of_first_4000": float(share)}


def _most_at_once(rows: list[tuple]) -> int:
    events = sorted([(s, 1) for s, _ in rows] + [(e, -1) for _, e in rows], key=lambda x: (x[0], x[1]))
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return top


def cap() -> dict:
    conn = _fresh(["SELECT broker.broker_set_limit('k2', 2, NULL)"])
    _enqueue(conn, "default", [_span(f"k2 {i}", "k2", 0.5) for i in range(12)])
    _enqueue(conn, "default", [_span(f"free {i}", None, 0.05) for i in range(10)])
    runner = _runner(("--workers-per-queue", "6"))
    try:
        _wait(conn, "SELECT count(*) FROM spans WHERE key = 'k2' AND ended IS NOT NULL", 12)
    finally:
        _stop(runner)
    keyed = conn.execute("SELECT started, ended FROM spans WHERE key = 'k2'").fetchall()
    free_first = conn.execute("SELECT (SELECT max(ended) FROM spans WHERE key IS NULL) < "
                              "(SELECT max(ended) FROM spans WHERE key = 'k2')").fetchone()[0]
    first_last = conn.execute("SELECT extract(epoch FROM max(ended) - min(started)) FROM spans WHERE key = 'k2'"
                              ).fetchone()[0]
    conn.close()
    return {"k2_most_at_once": _most_at_once(keyed), "unkeyed_done_before_last_k2": free_first,
            "k2_first_start_to_last_end_s": float(first_last)}


def rate() -> dict:
    conn = _fresh(["SELECT broker.broker_set_limit('r10', NULL, 10)"])
    _enqueue(conn, "default", [_span(f"r10 {i}", "r10", 0) for i in range(40)])
    runner = _runner(("--workers-per-queue", "4"))
    try:
        _wait(conn, "SELECT count(*) FROM spans WHERE ended IS NOT NULL", 40)
    finally:
        _stop(runner)
    spread = conn.execute("SELECT extract(epoch FROM max(started) - min(started)) FROM spans").fetchone()[0]
    conn.close()
    return {"r10_first_to_last_start_s": float(spread)}


ATTACKS = {
    "none": [],
    "dated infinity": ["INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority, run_after) "
                       "SELECT 'attacker', 'a ' || i, 'a', 'SELECT 1', 1000 + i, 'infinity' FROM generate_series(1, 20000) AS i"],
    "paused": ["INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (1, 'attacker')",
               "INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority) "
               "SELECT 'attacker', 'a ' || i, 'a', 'SELECT 1', 1000 + i FROM generate_series(1, 20000) AS i"],
    "held by a key's cap": ["INSERT INTO broker.broker_key_limit (tenant_id, concurrency_key, max_running) VALUES ('attacker', 'one', 1)",
                            "INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority, concurrency_key) "
                            "SELECT 'attacker', 'a ' || i, 'a', 'SELECT 1', 1000 + i, 'one' FROM generate_series(1, 20000) AS i"],
    "locked by its open transaction": ["INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority) "
                                       "SELECT 'attacker', 'a ' || i, 'a', 'SELECT 1', 1000 + i FROM generate_series(1, 5000) AS i"],
}


def claim_cost(kind: str, claims: int) -> dict:
    conn = _fresh(["INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str) "
                   "SELECT 'victim', 'v ' || i, 'v', 'SELECT 1' FROM generate_series(1, 20000) AS i",
                   "INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str) "
                   "VALUES ('attacker', 'ready', 'a', 'SELECT 1')"])
    for s in ATTACKS[kind]:
        conn.execute(s)
    conn.execute("ANALYZE broker.broker_jobs")
    holder = None
    if kind.startswith("locked"):
        holder = psycopg.connect(dbname=DB)
        holder.execute("SELECT count(*) FROM (SELECT 1 FROM broker.broker_jobs WHERE tenant_id = 'attacker' "
                       "AND job_priority >= 1000 FOR UPDATE) AS x")
    for _ in range(100):  # plans made, caches warm, and what the claims park is parked
        conn.execute("SELECT count(*) FROM broker.broker_get(1, NULL, 60, 2)")
    times = []
    for _ in range(claims):
        t0 = time.perf_counter()
        conn.execute("SELECT count(*) FROM broker.broker_get(1, NULL, 60, 1)").fetchone()
        times.append((time.perf_counter() - t0) * 1000)
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT * FROM broker.broker_get(1, NULL, 60, 1)"
                        ).fetchone()[0][0]["Plan"]
    if holder:
        holder.rollback()
        holder.close()
    conn.close()
    times.sort()
    return {"attack": kind, "claim_ms_mean": statistics.fmean(times), "claim_ms_p99": times[int(len(times) * 0.99) - 1],
            "claim_buffers": plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]}


def main() -> None:
    claims = env_int("BENCH_FLOW_CLAIMS", 500)
    results = {"machine": machine_facts(), "flood": [flood(100), flood(0)], "weights": weights(), "cap": cap(),
               "rate": rate(), "claim_cost": [claim_cost(k, claims) for k in ATTACKS]}
    path = write_json("flow", results)
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=2, default=str))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
