"""Benchmark (not a test): the server CPU a write into broker_jobs costs, this tree beside a baseline tree and
beside this tree without one part of the table at a time. `python -m bench.write_cpu` under `.ci/with-cluster`
(BENCH_BASELINE: the baseline's source tree, as for bench.run).

Each tree's built script goes into a schema of its own of one database (bench.broker_workloads.baseline_script),
and each variant is this tree's with one part dropped (a CHECK set, the partial indexes, a trigger, a default). A
procedure runs BENCH_WRITE_N (3,000) transactions of one single-row INSERT each (COMMIT in the loop), with
log_statement_stats on: the user and system CPU the server process spent on the CALL, which the wall clock of a
machine shared with other benchmarks does not give steadily. The variants are run in turn, BENCH_WRITE_ROUNDS (5)
times, and the median printed, µs a transaction and its difference from the baseline.

(run_after is given as statement_timestamp(): inside a procedure, a transaction after a COMMIT starts later than
the CALL's statement, so the column's default now() would date every job after statement_timestamp() and fire
the trigger that parks jobs dated later, which a client's own INSERT never does.)
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
from pathlib import Path

import psycopg

from . import common
from .broker_workloads import baseline_script

N = common.env_int("BENCH_WRITE_N", 3000)
ROUNDS = common.env_int("BENCH_WRITE_ROUNDS", 5)
DB = "bench_write_cpu"
INSERT = ("INSERT INTO {s}.broker_jobs (job_name, job_group, execute_str, run_after) "
          "VALUES ('single', 'single', 'SELECT 1', statement_timestamp())")
# The enqueue rows of bench.run, baseline and this tree only: (name, statement, jobs a statement); each a
# transaction of its own, as there.
CALLS = [
    ("broker_add_job, one a transaction",
     "PERFORM {s}.broker_add_job('single', 'SELECT 1', p_run_after => statement_timestamp())", 1),
    ("broker_add_job per row, 1,000 in one statement",
     "PERFORM count(j.job_id) FROM generate_series(1, 1000) AS g, LATERAL {s}.broker_add_job('bulk', 'SELECT 1', "
     "p_job_queue => 1 + g % 4, p_run_after => statement_timestamp()) AS j", 1000),
    ("floor, 1,000 rows in one INSERT",
     "INSERT INTO {s}.broker_jobs (job_name, job_group, execute_str, job_queue, run_after) SELECT 'bulk', 'bulk', "
     "'SELECT 1', 1 + g % 4, statement_timestamp() FROM generate_series(1, 1000) AS g", 1000),
]
# (schema, what it lacks of this tree's broker_jobs, statements that take it away; {s} is the schema)
VARIANTS = [
    ("w_tree", "nothing: this tree", []),
    ("w_no_flow_checks", "the CHECKs on concurrency_key and parked",
     ["ALTER TABLE {s}.broker_jobs DROP CONSTRAINT broker_jobs_concurrency_key_check, "
      "DROP CONSTRAINT broker_jobs_parked_check"]),
    ("w_no_flow_indexes", "the partial indexes later, key_running and key_pending",
     ["DROP INDEX {s}.broker_jobs_later_idx, {s}.broker_jobs_key_running_idx, {s}.broker_jobs_key_pending_idx"]),
    ("w_no_park_later", "the trigger that parks jobs dated later", ["DROP TRIGGER broker_jobs_park_later_trg ON {s}.broker_jobs"]),
    ("w_no_traceparent", "traceparent's default", ["ALTER TABLE {s}.broker_jobs ALTER traceparent DROP DEFAULT"]),
    ("w_narrow_claim", "tenant_id in the claim index",
     ["DROP INDEX {s}.broker_jobs_claim_idx",
      "CREATE INDEX broker_jobs_claim_idx ON {s}.broker_jobs (job_queue, job_priority DESC, run_after, job_id) "
      "WHERE complete_status = 0 AND pending_deps = 0 AND parked = 0"]),
]
STATS = re.compile(r"!\s+([0-9.]+) s user, ([0-9.]+) s system")


def install(schema: str, tree: Path) -> None:
    script = baseline_script(tree, schema).replace("SCHEMA broker ", f"SCHEMA {schema} ").replace("SCHEMA broker;", f"SCHEMA {schema};")
    common.sql(DB, f"CREATE SCHEMA {schema}")
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB], input=script, text=True, check=True,
                   stdout=subprocess.DEVNULL)
    common.sql(DB, f"SELECT {schema}.broker_add_job('warm', 'SELECT 1')", f"DELETE FROM {schema}.broker_jobs")


def cpu_us(schema: str, statement: str = INSERT, n: int = N) -> float:
    """Server CPU (user + system) of n transactions of statement (INSERT: one row into schema's broker_jobs),
    µs a transaction."""
    notices: list[str] = []
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_detail or d.message_primary or ""))
        conn.execute(f"CREATE PROCEDURE pg_temp.w() LANGUAGE plpgsql AS $$ BEGIN FOR i IN 1..{n} LOOP "
                     f"{statement.format(s=schema)}; COMMIT; END LOOP; END $$")
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET client_min_messages = log")
        conn.execute("SET log_statement_stats = on")
        notices.clear()
        conn.execute("CALL pg_temp.w()")
    found = [STATS.search(n) for n in notices]
    user, system = next((float(m[1]), float(m[2])) for m in found if m)
    return (user + system) * 1e6 / n


def run() -> dict:
    common.create_db(DB)
    try:
        install("w_base", Path(os.environ["BENCH_BASELINE"]).resolve())
        for schema, _what, statements in VARIANTS:
            install(schema, common.ROOT)
            common.sql(DB, *(s.format(s=schema) for s in statements))
        schemas = ["w_base"] + [v[0] for v in VARIANTS]
        runs: dict[str, list[float]] = {s: [] for s in schemas}
        calls: dict[str, dict[str, list[float]]] = {c[0]: {"w_base": [], "w_tree": []} for c in CALLS}
        for _ in range(ROUNDS):
            for s in schemas:
                runs[s].append(cpu_us(s))
            for name, statement, jobs in CALLS:
                for s in ("w_base", "w_tree"):
                    calls[name][s].append(cpu_us(s, statement, max(1, N // 10 // jobs)) / jobs)
    finally:
        common.drop_db(DB)
    medians = {s: statistics.median(v) for s, v in runs.items()}
    what = {"w_base": "the baseline tree", **{v[0]: v[1] for v in VARIANTS}}
    print(f"\none single-row INSERT a transaction, server CPU µs, median of {ROUNDS} rounds of {N}")
    common.print_table(["broker_jobs without", "µs", "- baseline", "runs"],
                       [[what[s], f"{m:.1f}", f"{m - medians['w_base']:+.1f}", " ".join(f"{x:.0f}" for x in runs[s])]
                        for s, m in medians.items()])
    print("\nthe enqueue rows of bench.run, server CPU µs a job, median (baseline, this tree, baseline ÷ this tree)")
    call_medians = {name: {s: statistics.median(v) for s, v in by.items()} for name, by in calls.items()}
    common.print_table(["statement", "baseline", "this tree", "ratio"],
                       [[name, f"{m['w_base']:.1f}", f"{m['w_tree']:.1f}", f"{m['w_base'] / m['w_tree']:.2f}"]
                        for name, m in call_medians.items()])
    return {"n": N, "rounds": ROUNDS, "runs_us": runs, "median_us": medians, "calls_us": calls}


if __name__ == "__main__":
    os.environ.setdefault("PGDATABASE", "postgres")
    print(f"\nresults: {common.write_json('write_cpu', run())}")
