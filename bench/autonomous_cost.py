"""Benchmark (not a test): what an autonomous job costs beside a regular one.
`python -m bench.autonomous_cost` against the cluster named by PG* (`.ci/with-cluster`): BENCH_AUTONOMOUS_JOBS
(100) jobs `ANALYZE public.bench_small` (a table of 100 rows) in one queue, drained by `pgbroker-runner` at its
defaults, as three kinds in turn, BENCH_AUTONOMOUS_ROUNDS (3) interleaved rounds (each kind once per round, each run
in a fresh database): regular jobs (batched, many per transaction), regular jobs each in a transaction of its own
(run_alone), and autonomous jobs (p_autonomous, via SET ROLE: each on a connection of its own). Prints, per kind, the
median time per job from the first start to the last completion, and what an autonomous job costs more than a
regular one run alone. Figures in docs/benchmarks.md ("Autonomous jobs").
"""
from __future__ import annotations

import os
import statistics
import subprocess

import psycopg

from . import common

JOBS = common.env_int("BENCH_AUTONOMOUS_JOBS", 100)
ROUNDS = common.env_int("BENCH_AUTONOMOUS_ROUNDS", 3)
DB = "bench_autonomous"
ROLE = "bench_maint"
KINDS = ("regular, batched", "regular, alone", "autonomous")


def setup() -> None:
    common.create_broker_db(DB)
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", str(common.ROOT / "sql" / "roles.sql")],
                   check=True, stdout=subprocess.DEVNULL)
    common.sql(DB, f"DO $$ BEGIN CREATE ROLE {ROLE} NOLOGIN IN ROLE broker_enqueue; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
               f"GRANT {ROLE} TO broker_runtime", f"GRANT USAGE, CREATE ON SCHEMA public TO {ROLE}",
               f"SET ROLE {ROLE}", "CREATE TABLE public.bench_small AS SELECT g AS n FROM generate_series(1, 100) AS g",
               "RESET ROLE", f"SELECT broker.broker_allow_autonomous('{ROLE}')",
               f"SET ROLE {ROLE}", "SELECT broker.broker_add_job('warm', 'SELECT 1')", "RESET ROLE",
               "DELETE FROM broker.broker_jobs")


def run(kind: str) -> float:
    """Seconds per job from the first start to the last completion."""
    setup()
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute(f"SET ROLE {ROLE}")
        conn.execute("SELECT broker.broker_add_job('analyze', 'ANALYZE public.bench_small', p_autonomous => %s) "
                     "FROM generate_series(1, %s)", (kind == "autonomous", JOBS))
        conn.execute("RESET ROLE")
        if kind == "regular, alone":
            conn.execute("UPDATE broker.broker_jobs SET run_alone = true")
        common.drain_with_runner(conn, DB, poll=0.1)
        failed, first, last = conn.execute(
            "SELECT count(*) FILTER (WHERE complete_status <> 2), extract(epoch FROM min(started_at))::float8, "
            "extract(epoch FROM max(finished_at))::float8 FROM broker.broker_jobs").fetchone()
        if failed:
            raise RuntimeError(f"{kind}: {failed} jobs did not complete")
    return (last - first) / JOBS


def main() -> None:
    print(f"{JOBS} jobs per run, {ROUNDS} rounds, load {os.getloadavg()[0]:.1f} at the start")
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    try:
        for _ in range(ROUNDS):
            for kind in KINDS:
                times[kind].append(run(kind))
    finally:
        common.drop_db(DB)
    med = {k: statistics.median(v) for k, v in times.items()}
    for kind in KINDS:
        print(f"{kind:18s} {med[kind] * 1000:7.1f} ms per job (runs: "
              + ", ".join(f"{t * 1000:.1f}" for t in times[kind]) + ")")
    print(f"an autonomous job costs {(med['autonomous'] - med['regular, alone']) * 1000:.1f} ms more than a regular one "
          f"run alone, {(med['autonomous'] - med['regular, batched']) * 1000:.1f} ms more than a batched one; "
          f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
