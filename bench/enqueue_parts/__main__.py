"""Where a single enqueue spends its time: `python -m bench.enqueue_parts` (not a test).

Under `.ci/with-cluster` (or any cluster named by PG*; pgsql_broker installed into it). One
database with pgsql_broker, sql/roles.sql and bench/enqueue_parts/setup.sql: a ladder of tables,
each adding one part of broker_jobs to the one before (columns and defaults, indexes, CHECKs,
the foreign key, the statement trigger), beside a peer's narrow table. One pgbench run per
role (the harness's superuser, which row-level security does not apply to, and a
broker_enqueue login, which it does) inserts one row per transaction into every rung and calls
broker_add_job, the scripts interleaved at random in the same run, so their mean latencies
compare like with like on a noisy machine. A third run times the PL/pgSQL checks of
broker_add_job, each called 1,000 times in one statement. Prints the tables and writes
bench/results/enqueue_parts.json. With BENCH_BASELINE (a source tree, see bench/broker_workloads.py), that
tree's code also goes into the database as schema broker_base, and a fourth run interleaves the calls
of both (one job per transaction; 1,000 jobs a call): before and after in the same minutes.
BENCH_PARTS_SECONDS (20) per pgbench run;
BENCH_PARTS_SYNCHRONOUS_COMMIT=off takes the WAL flush of each commit (the same for every rung,
and most of the noise on a shared disk) out of the ladder's figures (the JSON says which).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .. import common
from ..broker_workloads import baseline_script

HERE = Path(__file__).resolve().parent
SECONDS = common.env_int("BENCH_PARTS_SECONDS", 20)
SYNCHRONOUS_COMMIT = os.environ.get("BENCH_PARTS_SYNCHRONOUS_COMMIT", "on")
DB = "bench_enqueue_parts"
ROLE = "parts_enqueuer"
LOOPS = ("nothing", "job_problem", "tenant_allowed", "check_autonomous", "executor_lookup", "may_run_as")


BASE = "broker_base"


def setup() -> None:
    common.create_db(DB, None, "CREATE EXTENSION pgsql_broker")
    for f in (common.ROOT / "sql" / "roles.sql", HERE / "setup.sql"):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", str(f)],
                       check=True, stdout=subprocess.DEVNULL)
    common.sql(DB, f"DROP ROLE IF EXISTS {ROLE}", f"CREATE ROLE {ROLE} LOGIN IN ROLE broker_enqueue",
               "SELECT broker.broker_add_job('warm', 'SELECT 1')")  # the executors exist before timing
    subprocess.run(["psql", "-X", "-q", "-U", ROLE, "-d", DB, "-c", "SELECT broker.broker_add_job('warm', 'SELECT 1')"],
                   check=True, stdout=subprocess.DEVNULL)
    if os.environ.get("BENCH_BASELINE"):
        # (owned as schema broker is, which its executor check compares with the executors' schemas the two share)
        common.sql(DB, f"CREATE SCHEMA {BASE}")
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB],
                       input=baseline_script(Path(os.environ["BENCH_BASELINE"]).resolve(), BASE),
                       text=True, check=True, stdout=subprocess.DEVNULL)
        common.sql(DB, f"ALTER SCHEMA {BASE} OWNER TO broker_admin", f"SELECT {BASE}.broker_add_job('warm', 'SELECT 1')")


def pgbench(scripts: list[Path], user: str | None = None, weights: dict | None = None) -> dict:
    """Mean latency (ms) per script of one pgbench run (common.pgbench_latencies), with this run's commit setting."""
    return common.pgbench_latencies(DB, scripts, SECONDS, user, weights,
                                    {"PGOPTIONS": f"-c synchronous_commit={SYNCHRONOUS_COMMIT}"})


def loop_scripts(tmp: Path) -> list[Path]:
    paths = []
    for what in LOOPS:
        p = tmp / f"loop_{what}.sql"
        p.write_text(f"SELECT parts.loop('{what}');\n")
        paths.append(p)
    return paths


def ab_scripts(tmp: Path) -> list[Path]:
    """This tree's enqueue calls and the baseline's (schema broker_base), one script each."""
    jobs = ", ".join('{"job_name": "bulk", "execute_str": "SELECT 1", "job_queue": %d}' % (1 + i % 4) for i in range(1000))
    names, sqls = "{" + ",".join(["bulk"] * 1000) + "}", "{" + ",".join(['"SELECT 1"'] * 1000) + "}"
    queues = "{" + ",".join(str(1 + i % 4) for i in range(1000)) + "}"
    calls = {}
    for schema, who in (("broker", "this_tree"), (BASE, "baseline")):
        calls[f"single_{who}"] = f"SELECT job_id FROM {schema}.broker_add_job('single', 'SELECT 1');"
        calls[f"bulk_jsonb_{who}"] = f"SELECT count(*) FROM {schema}.broker_add_jobs('[{jobs}]');"
    calls["bulk_arrays_this_tree"] = f"SELECT count(*) FROM broker.broker_add_jobs_arrays('{names}', '{sqls}', '{queues}');"
    paths = []
    for name, sql in calls.items():
        p = tmp / f"{name}.sql"
        p.write_text(sql + "\n")
        paths.append(p)
    return paths


def run() -> dict:
    """The three pgbench runs; prints the tables and returns the figures (bench.run: workload parts)."""
    setup()
    try:
        ladder = sorted(HERE.glob("[0-9][0-9]_*.sql"))
        as_super = pgbench(ladder)
        as_role = pgbench([p for p in ladder if not p.stem.startswith(("03", "04", "05", "06", "07"))], ROLE)
        tmp = common.RESULTS / ".enqueue_parts"
        tmp.mkdir(parents=True, exist_ok=True)
        loops = pgbench(loop_scripts(tmp))
        # (1,000-job calls are picked 1 time in 40: each takes about as long as 40 single ones)
        ab = pgbench(ab_scripts(tmp), weights={"single": 40}) if os.environ.get("BENCH_BASELINE") else None
    finally:
        common.drop_db(DB)
        common.sql("postgres", f"DROP ROLE IF EXISTS {ROLE}")
    base = loops["loop_nothing"]
    per_call_us = {k.removeprefix("loop_"): (v - base) * 1000 / 1000 for k, v in loops.items() if k != "loop_nothing"}
    result = {"seconds": SECONDS, "synchronous_commit": SYNCHRONOUS_COMMIT,
              "superuser_ms": as_super, "enqueue_role_ms": as_role, "check_us_per_call": per_call_us}
    if ab:
        result["baseline_ms"] = ab
    for title, runs in (("superuser (no row-level security)", as_super), (f"{ROLE} (broker_enqueue)", as_role)):
        print(f"\none row per transaction, {title}: mean ms, and over the narrow table's")
        common.print_table(["script", "ms", "÷ narrow", "+ over the rung before"],
                           [[k, f"{v:.3f}", f"{v / runs['01_narrow']:.2f}",
                             f"{v - prev:+.3f}" if prev is not None else ""]
                            for (k, v), prev in zip(runs.items(), [None] + list(runs.values())[:-1])])
    if ab:
        print("\nthis tree and the baseline (schema broker_base), interleaved: mean ms a call")
        common.print_table(["call", "ms"], [[k, f"{v:.3f}"] for k, v in ab.items()])
    print("\nbroker_add_job's checks, µs a call (1,000 calls in one statement, less an empty loop)")
    common.print_table(["check", "µs"], [[k, f"{v:.1f}"] for k, v in per_call_us.items()])
    return result


if __name__ == "__main__":
    os.environ.setdefault("PGDATABASE", "postgres")
    print(f"\nresults: {common.write_json('enqueue_parts', run())}")
