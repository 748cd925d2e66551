"""Benchmark (not a test): what broker_jobs' parts cost a claim and its completion. `python -m bench.table_parts`
against the cluster named by PG* (`.ci/with-cluster`; pgsql_broker installed into it).

A ladder of tables, each with one part of broker_jobs more than the one before, each filled with BENCH_TABLE_ROWS
(150,000) pending jobs of queue 1, vacuumed, then with autovacuum off (a vacuum of one table during the timed run
would slow whichever scripts ran at the time):
  narrow        only the columns the claim and the completion read or write and those the fill gives (names, SQL),
                its primary key and the claim index
  columns       broker_jobs' 33 columns and defaults, the same two indexes
  indexes       and all of broker_jobs' indexes
  checks        and its CHECK constraints
  broker_jobs   broker_jobs itself: and its foreign keys, its triggers, row-level security (not applied: the
                superuser bypasses its policies)
and beside them, each the `checks` rung and one part more or different: run_as and enqueued_by as text instead of
the 64-byte name (`name_as_text`), broker_jobs' finished-count trigger (`count_trigger`), its ready_xid trigger
(`ready_xid_trigger`), each made from the shipped trigger's definition.
Each is claimed and completed by the statements of the peer page's `broker_jobs` floor (bench/ceiling.py: a claim
of up to 50 jobs in its own transaction, then their completion in one UPDATE), one pgbench client as the superuser
for BENCH_TABLE_SECONDS (30), the tables' scripts chosen at random in the same run, so that their means compare like
with like on a noisy machine. Prints the mean ms per script, µs per job and the ratio to the narrow table. Figures
in docs/benchmarks.md ("What limits the targets that are not met").
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psycopg

from . import common
from .ceiling import FLOOR_PER_CLAIM, FLOOR_SCRIPTS

SECONDS = common.env_int("BENCH_TABLE_SECONDS", 30)
ROWS = common.env_int("BENCH_TABLE_ROWS", 150_000)
DB = "bench_table_parts"
CLAIM_INDEX = ("CREATE INDEX ON {t} (job_queue, job_priority DESC, run_after, job_id) "
               "WHERE complete_status = 0 AND pending_deps = 0")
LIKE = "CREATE TABLE {t} (LIKE broker.broker_jobs INCLUDING DEFAULTS INCLUDING IDENTITY{more})"
CHECKS = LIKE.format(t="{t}", more=" INCLUDING INDEXES INCLUDING CONSTRAINTS")
# (name, label, statements that make it; {t} is the table)
RUNGS = [
    ("narrow", "the columns the claim, the completion and the fill use, primary key and claim index",
     ["CREATE TABLE {t} (job_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, job_queue integer NOT NULL, "
      "job_priority integer NOT NULL DEFAULT 0, run_after timestamptz NOT NULL DEFAULT now(), "
      "complete_status smallint NOT NULL DEFAULT 0, pending_deps integer NOT NULL DEFAULT 0, "
      "attempts integer NOT NULL DEFAULT 0, started_at timestamptz, lease_token uuid, lease_instance_id bigint, "
      "lease_expires_at timestamptz, finished_at timestamptz, job_name text NOT NULL, job_group text NOT NULL, "
      "execute_str text NOT NULL)", CLAIM_INDEX]),
    ("columns", "broker_jobs' columns and defaults, the same two indexes",
     [LIKE.format(t="{t}", more=""), "ALTER TABLE {t} ADD PRIMARY KEY (job_id)", CLAIM_INDEX]),
    ("indexes", "and all of broker_jobs' indexes", [LIKE.format(t="{t}", more=" INCLUDING INDEXES")]),
    ("checks", "and its CHECK constraints", [CHECKS]),
    ("broker_jobs", "broker_jobs itself: and its foreign keys and triggers (RLS not applied: superuser)", []),
    # beside the chain: the checks rung and one part more (or different)
    ("name_as_text", "the checks rung, run_as and enqueued_by as text (not name)",
     [CHECKS, "ALTER TABLE {t} ALTER run_as TYPE text, ALTER enqueued_by TYPE text"]),
    ("count_trigger", "the checks rung and broker_jobs' finished-count trigger (statement level, transition tables)",
     [CHECKS, "TRIGGER broker_jobs_count_finished_update_trg"]),
    ("ready_xid_trigger", "the checks rung and broker_jobs' ready_xid trigger (BEFORE UPDATE, a row each)",
     [CHECKS, "TRIGGER broker_jobs_ready_xid_trg"]),
]


def table(name: str) -> str:
    return "broker.broker_jobs" if name == "broker_jobs" else f"x.{name}"


def setup() -> None:
    common.create_broker_db(DB)
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA x")
        for name, _label, statements in RUNGS:
            t = table(name)
            for statement in statements:
                if statement.startswith("TRIGGER "):  # broker_jobs' trigger of that name, on this table
                    statement = conn.execute(
                        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'broker.broker_jobs'::regclass "
                        "AND tgname = %s", (statement.split()[1],)).fetchone()[0].replace(" ON broker.broker_jobs ", " ON {t} ")
                conn.execute(statement.format(t=t))
            conn.execute(f"INSERT INTO {t} (job_name, job_group, execute_str, job_queue) "
                         f"SELECT 'drain', 'drain', 'SELECT 1', 1 FROM generate_series(1, {ROWS})")
        conn.execute("VACUUM ANALYZE")
        for name, _label, _statements in RUNGS:
            conn.execute(f"ALTER TABLE {table(name)} SET (autovacuum_enabled = off)")
        conn.execute("CHECKPOINT")


def script(name: str) -> str:
    """The broker_jobs floor's claim and completion, on this rung's table, of queue 1 (one client)."""
    text = FLOOR_SCRIPTS["broker_jobs"]
    if "broker.broker_jobs" not in text or ":queue" not in text:
        raise RuntimeError("bench/ceiling.py's broker_jobs floor no longer reads as this ladder expects")
    return text.replace("broker.broker_jobs", table(name)).replace(":queue", "1")


def main() -> None:
    setup()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, _label, _statements in RUNGS:
                paths.append(Path(tmp) / f"{name}.sql")
                paths[-1].write_text(script(name))
            found = common.pgbench_latencies(DB, paths, SECONDS, prepared=False)  # (\gset splices into the next)
            with psycopg.connect(dbname=DB) as conn:
                left = {name: conn.execute(f"SELECT count(*) FROM {table(name)} WHERE complete_status = 0").fetchone()[0]
                        for name, _label, _statements in RUNGS}
    finally:
        common.drop_db(DB)
    empty = [name for name, n in left.items() if n < FLOOR_PER_CLAIM]
    if empty:
        raise SystemExit(f"bench.table_parts: {', '.join(empty)} ran out of jobs: raise BENCH_TABLE_ROWS")
    narrow = found["narrow"]
    print(f"a claim of {FLOOR_PER_CLAIM} jobs and their completion (two transactions), one pgbench client, "
          f"{SECONDS} s, load {os.getloadavg()[0]:.1f}: mean ms")
    for name, label, _statements in RUNGS:
        ms = found[name]
        print(f"  {name:17s} {ms:7.2f} ms  {ms * 1000 / FLOOR_PER_CLAIM:6.1f} µs a job  {ms / narrow:5.2f} x narrow"
              f"   ({label})")


if __name__ == "__main__":
    main()
