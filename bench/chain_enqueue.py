"""Enqueueing a dependency chain with broker_add_jobs (no runner).

one call   a chain of N jobs in one broker_add_jobs call: job i in group c<i> waits on
           group c<i-1>; N = 300, 1,000 and 10,000 (BENCH_CHAIN_SIZES).
calls      the 10,000-job chain in calls of 1,000, each in its own transaction: the first
           job of a call waits by id on the previous call's last job, the others as above;
           the total and the slowest call.
Each figure is one timed call (or series of calls) in a fresh database, committed.

    python -m bench.chain_enqueue [--sql FILE ...]

--sql FILE runs FILE in each fresh database after CREATE EXTENSION (e.g. sources of
sql/ not installed yet, applied over the installed extension). BENCH_CHAIN_CALLS_TOTAL=0
leaves the calls of 1,000 out.
"""
from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path

import psycopg

from . import common

SIZES = [int(x) for x in os.environ.get("BENCH_CHAIN_SIZES", "300,1000,10000").split(",")]
CALL_SIZE = common.env_int("BENCH_CHAIN_CALL", 1_000)
CALLS_TOTAL = common.env_int("BENCH_CHAIN_CALLS_TOTAL", 10_000)


def _chain(first: int, last: int, after_id: int | None) -> str:
    jobs = []
    for i in range(first, last + 1):
        job = {"job_name": f"c{i}", "execute_str": "SELECT 1", "job_group": f"c{i}"}
        if i > first:
            job["depends_on_groups"] = [f"c{i - 1}"]
        elif after_id is not None:
            job["depends_on_job_ids"] = [after_id]
        jobs.append(job)
    return json.dumps(jobs)


def _fresh(sql_files: list[Path]) -> str:
    db = f"bench_chain_{uuid.uuid4().hex[:6]}"
    common.create_broker_db(db)
    for f in sql_files:
        common.sql(db, f.read_text())
    return db


def _timed_calls(db: str, calls: list[tuple[int, int]]) -> list[float]:
    """Each (first, last) slice in its own transaction, chained by id to the previous one; seconds per call."""
    seconds, after = [], None
    with psycopg.connect(dbname=db) as conn:
        for first, last in calls:
            payload = _chain(first, last, after)
            t0 = time.perf_counter()
            after = conn.execute("SELECT max(job_id) FROM broker.broker_add_jobs(%s::jsonb)", (payload,)).fetchone()[0]
            conn.commit()
            seconds.append(time.perf_counter() - t0)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sql", type=Path, action="append", default=[])
    args = parser.parse_args()
    facts = common.machine_facts()
    rows, results = [], {"machine": facts, "one_call": {}, "calls": {}}
    for n in SIZES:
        db = _fresh(args.sql)
        try:
            (s,) = _timed_calls(db, [(1, n)])
        finally:
            common.drop_db(db)
        results["one_call"][n] = s
        rows.append([f"{n:,} jobs, one call", common.fmt(s * 1000, " ms"), common.fmt(s * 1e6 / n, " µs")])
    if CALLS_TOTAL > 0:  # (0: one-call figures only, e.g. for code that takes minutes)
        db = _fresh(args.sql)
        try:
            seconds = _timed_calls(db, [(k, min(k + CALL_SIZE - 1, CALLS_TOTAL))
                                        for k in range(1, CALLS_TOTAL + 1, CALL_SIZE)])
        finally:
            common.drop_db(db)
        results["calls"] = {"call_size": CALL_SIZE, "total": CALLS_TOTAL, "seconds": seconds}
        rows.append([f"{CALLS_TOTAL:,} jobs in calls of {CALL_SIZE:,}", common.fmt(sum(seconds) * 1000, " ms"),
                     common.fmt(sum(seconds) * 1e6 / CALLS_TOTAL, " µs")])
        rows.append([f"  slowest call of {CALL_SIZE:,}", common.fmt(max(seconds) * 1000, " ms"), ""])
    results["loadavg_at_end"] = os.getloadavg()
    common.print_table(["chain", "enqueue", "per job"], rows)
    print(f"load average at start {facts['loadavg_at_start']}, at end {results['loadavg_at_end']}")
    common.write_json("chain_enqueue", results)


if __name__ == "__main__":
    main()
