"""Benchmark (not a test): where a 1,000-job batch enqueue spends its time. `python -m bench.bulk_parts` against
the cluster named by PG* (`.ci/with-cluster`; pgsql_broker installed into it). bench/enqueue_parts' database
(pgsql_broker and a peer's narrow queue table with its statement trigger that notifies, parts.narrow_trg); one pgbench client as the
superuser for BENCH_BULK_SECONDS (20), one transaction per script, the scripts chosen at random in the same
run: 1,000 rows in one INSERT ... SELECT FROM unnest(...) into the narrow table, the same into broker_jobs
(its defaults, CHECKs, indexes and statement trigger, none of broker_add_jobs_arrays' rules), and one
broker_add_jobs_arrays call of 1,000 jobs (the rules too). Prints the mean ms per script and per row.
Figures in docs/benchmarks.md ("Enqueue").
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from . import common
from .enqueue_parts.__main__ import DB, ROLE, setup

SECONDS = common.env_int("BENCH_BULK_SECONDS", 20)
ROWS = 1000
NAMES = "'{" + ",".join(["bulk"] * ROWS) + "}'::text[]"
SQLS = "'{" + ",".join(['"SELECT 1"'] * ROWS) + "}'::text[]"
QUEUES = "'{" + ",".join(str(1 + i % 4) for i in range(ROWS)) + "}'::integer[]"
SCRIPTS = {
    "narrow_insert": f"INSERT INTO parts.narrow_trg (entrypoint, priority) SELECT n, q FROM ROWS FROM (unnest({NAMES}), "
                     f"unnest({QUEUES})) AS u(n, q);",
    "broker_jobs_insert": "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
                          f"SELECT n, n, s, q FROM ROWS FROM (unnest({NAMES}), unnest({SQLS}), unnest({QUEUES})) AS u(n, s, q);",
    "broker_add_jobs_arrays": f"SELECT count(*) FROM broker.broker_add_jobs_arrays({NAMES}, {SQLS}, {QUEUES});",
}


def main() -> None:
    setup()  # (bench/enqueue_parts' database: its narrow table, the executor made before timing)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, sql in SCRIPTS.items():
                paths.append(Path(tmp) / f"{name}.sql")
                paths[-1].write_text(sql + "\n")
            found = common.pgbench_latencies(DB, paths, SECONDS, prepared=False)
    finally:
        common.drop_db(DB)
        common.sql("postgres", f"DROP ROLE IF EXISTS {ROLE}")
    narrow = float(found["narrow_insert"])
    print(f"1,000 rows a transaction, one pgbench client, {SECONDS} s, load {os.getloadavg()[0]:.1f}: mean ms")
    for name in SCRIPTS:
        ms = float(found[name])
        print(f"  {name:24s} {ms:8.2f} ms  {ms * 1000 / ROWS:6.1f} µs a row  {ms / narrow:5.2f} x narrow")


if __name__ == "__main__":
    main()
