"""Benchmark (not a test): what one attempt row costs, in its parts. `python -m bench.attempt_parts` against the
cluster named by PG* (`.ci/with-cluster`; pgsql_broker installed into it). A database with 20,000 claimed jobs
(`SELECT 1`, running, under a lease); one pgbench client as the superuser for BENCH_ATTEMPT_SECONDS (30), the
scripts chosen at random in the same run, each one transaction that records the completed attempts of 50 jobs
(a random run of ids) as broker_run_batch does (`broker._record_attempts`, each job's report '1' chr(31) '': one
row, no output), or a variant with one part taken out, beside the same transaction with only a read of the 50
jobs: without the command status (`broker._command_status`, one PL/pgSQL call a row), into a copy of
broker_job_attempts without its foreign key to broker_jobs, and into one without that key and the job index
(`broker_job_attempts_job_idx`). Prints the mean ms per script and µs per row over the read. Figures in
docs/benchmarks.md ("What limits the targets that are not met").
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psycopg

from . import common

SECONDS = common.env_int("BENCH_ATTEMPT_SECONDS", 30)
DB = "bench_attempt_parts"
JOBS, ROWS = 20000, 50
RECORD = "broker._record_attempts(bigint[],text,text[],text[],text[])"
# the variants: (function, what is replaced in the shipped function's definition)
VARIANTS = {
    "no_command_status": ("x.rec_no_command_status",
                          {"broker._command_status(j.execute_str, j.job_language, r.n)": "NULL"}),
    "no_foreign_key": ("x.rec_no_foreign_key",
                       {"INSERT INTO broker.broker_job_attempts": "INSERT INTO x.attempts_no_fk"}),
    "no_foreign_key_nor_job_index": ("x.rec_no_fk_no_idx",
                                     {"INSERT INTO broker.broker_job_attempts": "INSERT INTO x.attempts_no_fk_no_idx"}),
}


def setup() -> None:
    common.create_broker_db(DB)
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, complete_status, "
                     "lease_token, lease_expires_at, attempts, started_at) "
                     "SELECT 'drain', 'drain', 'SELECT 1', 1 + g %% 4, 1, gen_random_uuid(), now() + interval '1 hour', "
                     "1, now() FROM generate_series(1, %s) AS g", (JOBS,))
        conn.execute("CREATE SCHEMA x")
        conn.execute("CREATE TABLE x.attempts_no_fk (LIKE broker.broker_job_attempts INCLUDING ALL)")
        conn.execute("CREATE TABLE x.attempts_no_fk_no_idx (LIKE broker.broker_job_attempts INCLUDING DEFAULTS "
                     "INCLUDING IDENTITY INCLUDING CONSTRAINTS)")
        conn.execute("ALTER TABLE x.attempts_no_fk_no_idx ADD PRIMARY KEY (attempt_id)")
        shipped = conn.execute(f"SELECT pg_get_functiondef('{RECORD}'::regprocedure)").fetchone()[0]
        for name, changes in VARIANTS.values():
            body = shipped.replace("broker._record_attempts(", f"{name}(", 1)
            for old, new in changes.items():
                if old not in body:
                    raise RuntimeError(f"{name}: {old!r} is not in {RECORD} any more")
                body = body.replace(old, new)
            conn.execute(body)
        conn.execute("ANALYZE")
        conn.execute("CHECKPOINT")


def script(call: str) -> str:
    ids = f"ARRAY(SELECT pg_catalog.generate_series(:s::bigint, :s::bigint + {ROWS - 1}))"
    reports = f"ARRAY(SELECT '1' || chr(31) FROM pg_catalog.generate_series(1, {ROWS}))"
    body = (f"SELECT {call}({ids}, 'completed', NULL, NULL, {reports});" if call else
            f"SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY ({ids});")
    return f"\\set s random(1, {JOBS - ROWS})\nBEGIN;\n{body}\nCOMMIT;\n"


def main() -> None:
    setup()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            calls = {"read_only": None, "as_shipped": "broker._record_attempts",
                     **{k: name for k, (name, _) in VARIANTS.items()}}
            paths = []
            for key, call in calls.items():
                paths.append(Path(tmp) / f"{key}.sql")
                paths[-1].write_text(script(call))
            ms = common.pgbench_latencies(DB, paths, SECONDS)
    finally:
        common.drop_db(DB)
    base = ms["read_only"]
    print(f"{ROWS} completed attempts a transaction, one pgbench client, {SECONDS} s, load {os.getloadavg()[0]:.1f}")
    for key, value in ms.items():
        extra = "" if key == "read_only" else f"  {(value - base) * 1000 / ROWS:6.1f} µs a row over the read"
        print(f"  {key:30s} {value:7.3f} ms{extra}")


if __name__ == "__main__":
    main()
