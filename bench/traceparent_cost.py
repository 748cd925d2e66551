"""What broker_jobs.traceparent (its default reads and checks the setting broker.traceparent) costs an enqueue.

The extension script before the column (BASE_SCRIPT, e.g. `git show <commit>:extension/pgsql_broker--0.2.0.sql`)
and the one installed now, in two databases of one cluster, measured in turns: 200 broker_add_job calls in a
transaction, and one broker_add_jobs of 1000 jobs, each without and with SET LOCAL broker.traceparent (the base
ignores the setting). The fastest of the samples of each, as a ratio new/base (a shared machine's noise only adds
time). And the column's default alone, per row (a million rows of a SELECT). Not a test.

    PGBIN=... .ci/with-cluster .venv/bin/python -m bench.traceparent_cost BASE_SCRIPT [SAMPLES]
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
MANY = "SELECT count(*) FROM broker.broker_add_jobs((SELECT jsonb_agg(jsonb_build_object('job_name', 'b', " \
       "'execute_str', 'SELECT 1')) FROM generate_series(1, 1000)))"


def _create(db: str) -> None:
    with psycopg.connect(dbname="postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgsql_broker")


def _sample(db: str, case: str, traced: bool) -> float:
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        conn.execute("TRUNCATE broker.broker_jobs CASCADE")
        conn.execute("CHECKPOINT")
        started = time.perf_counter()
        with conn.transaction():
            if traced:
                conn.execute("SELECT set_config('broker.traceparent', %s, true)", (TRACEPARENT,))
            if case == "one":
                for _ in range(200):
                    conn.execute("SELECT broker.broker_add_job('b', 'SELECT 1')")
            else:
                conn.execute(MANY)
        return time.perf_counter() - started


def _default_alone(traced: bool, samples: int) -> float:
    """ns per row of the column's default alone (broker._traceparent(), inlined), less an empty row's."""
    best = {}
    with psycopg.connect(dbname="new") as conn:
        if traced:
            conn.execute("SELECT set_config('broker.traceparent', %s, true)", (TRACEPARENT,))
        for expr in ("NULL::text", "broker._traceparent()"):
            query = f"SELECT count({expr}) FROM generate_series(1, 1000000)"
            for _ in range(samples):
                started = time.perf_counter()
                conn.execute(query)
                best[expr] = min(best.get(expr, float("inf")), time.perf_counter() - started)
    return (best["broker._traceparent()"] - best["NULL::text"]) * 1e3  # (1e6 rows: s to ns per row)


def main(base_script: str, samples: int = 15) -> None:
    share = subprocess.run([os.path.join(os.environ["PGBIN"], "pg_config"), "--sharedir"], capture_output=True,
                           text=True, check=True).stdout.strip()
    installed = Path(share) / "extension" / "pgsql_broker--0.2.0.sql"
    saved = installed.read_bytes()
    shutil.copyfile(base_script, installed)
    try:
        _create("base")
    finally:
        installed.write_bytes(saved)
    _create("new")
    for traced in (False, True):
        print(f"the default alone{', traceparent set' if traced else ''}: {_default_alone(traced, samples):.0f} ns "
              "per row", flush=True)
    for case, per in (("one", 200), ("many", 1000)):
        for traced in (False, True):
            best = {"base": float("inf"), "new": float("inf")}
            for i in range(samples):
                for db in ("base", "new") if i % 2 == 0 else ("new", "base"):  # (neither always second)
                    best[db] = min(best[db], _sample(db, case, traced))
            label = f"{'broker_add_job x200' if case == 'one' else 'broker_add_jobs(1000)'}" \
                    f"{', traceparent set' if traced else ''}"
            print(f"{label}: base {best['base'] / per * 1e6:.1f} us/job, new {best['new'] / per * 1e6:.1f} us/job, "
                  f"new/base {best['new'] / best['base']:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
