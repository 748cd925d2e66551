"""Benchmark (not a test): the claim's fixed cost, this tree against a baseline tree, in one run.
`BENCH_BASELINE=<tree> python -m bench.claim_cost` against the cluster named by PG* (`.ci/with-cluster`;
PGBIN names its pgbench). BENCH_BASELINE is another source tree's root (e.g. `git archive main` unpacked).
One database holds both: this tree's built script in schema broker, the baseline's in schema
broker_baseline, both as plain scripts (bench.broker_workloads.baseline_script), so that they differ only in
their SQL and share the table's pages, the server and the machine's load. Three workloads, each one
transaction, one pgbench client as the superuser, prepared statements: a claim of one task
(`broker_claim_tasks`, then its completion and one task enqueued again), a claim of 32 tasks (the same with
32), and a claim of one SQL job of queue 1 with a claim token, as the runner's (`broker_get`, then the job
marked completed and one enqueued again). Each workload runs BENCH_CLAIM_SECONDS (10) with the two trees' scripts chosen at random, transaction
by transaction, BENCH_CLAIM_RUNS (5) times. Prints, per workload and tree, the claim statement's mean latency
(pgbench -r) of each run, their medians, and the median of the runs' ratios (this tree over the baseline).
Figures in docs/benchmarks.md ("The claim's fixed cost (issue 37)").
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from . import common
from .broker_workloads import baseline_script

SECONDS = common.env_int("BENCH_CLAIM_SECONDS", 10)
RUNS = common.env_int("BENCH_CLAIM_RUNS", 5)
READY = 1000   # tasks and jobs ready in each schema: a claim always finds some
DB = "bench_claim_cost"
SCHEMAS = {"baseline": "broker_baseline", "this tree": "broker"}
WORKLOADS = {
    "tasks_1": """BEGIN;
SELECT array_agg(job_id) AS ids, array_agg(lease_token) AS tokens FROM S.broker_claim_tasks(ARRAY['noop'], 1) \\gset
SELECT count(S.broker_complete_task(i, t)) FROM unnest(:ids::bigint[], :tokens::uuid[]) AS c(i, t);
SELECT count(a.job_id) FROM S.broker_add_task('noop') AS a;
COMMIT;
""",
    "tasks_32": """BEGIN;
SELECT array_agg(job_id) AS ids, array_agg(lease_token) AS tokens FROM S.broker_claim_tasks(ARRAY['noop'], 32) \\gset
SELECT count(S.broker_complete_task(i, t)) FROM unnest(:ids::bigint[], :tokens::uuid[]) AS c(i, t);
SELECT count(a.job_id) FROM generate_series(1, 32) AS g, LATERAL S.broker_add_task('noop', jsonb_build_object('n', g)) AS a;
COMMIT;
""",
    "get_1": """BEGIN;
SELECT array_agg(job_id) AS ids FROM S.broker_get(1, NULL, NULL, 1, gen_random_uuid()) \\gset
UPDATE S.broker_jobs SET complete_status = 2, finished_at = now(), lease_token = NULL, lease_expires_at = NULL
 WHERE job_id = ANY (:ids::bigint[]);
SELECT S.broker_add_job('noop', 'SELECT 1');
COMMIT;
""",
}
# pgbench -r: each script's statements under "SQL script N: <file>", the claim the first SELECT
CLAIM = re.compile(r"SQL script \d+: (\S+)\n(?:.*\n)*?\s+([0-9.]+)\s+\d+\s+SELECT array_agg\(job_id\)")


def setup() -> None:
    common.create_db(DB, None, *(f"CREATE SCHEMA {s}" for s in SCHEMAS.values()))
    trees = {"baseline": Path(os.environ["BENCH_BASELINE"]).resolve(), "this tree": common.ROOT}
    for key, schema in SCHEMAS.items():
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB], input=baseline_script(trees[key], schema),
                       text=True, check=True, stdout=subprocess.DEVNULL)
        # (g in each call: one call a row)
        common.sql(DB, f"SELECT count(a.job_id) FROM generate_series(1, {READY}) AS g, "
                       f"LATERAL {schema}.broker_add_task('noop', jsonb_build_object('n', g)) AS a",
                   f"SELECT count(a.job_id) FROM generate_series(1, {READY}) AS g, "
                   f"LATERAL {schema}.broker_add_job('noop', 'SELECT ' || g) AS a")
    common.sql(DB, "VACUUM ANALYZE")


def claim_ms(paths: list[Path]) -> dict:
    done = subprocess.run([common.PGBENCH, "-n", "-M", "prepared", "-c", "1", "-T", str(SECONDS), "-r"]
                          + [a for p in paths for a in ("-f", str(p))] + [DB], capture_output=True, text=True)
    found = {Path(name).stem: float(ms) for name, ms in CLAIM.findall(done.stdout)}
    if done.returncode != 0 or len(found) != len(paths):
        raise RuntimeError(f"pgbench failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n{done.stdout}")
    return found


def main() -> None:
    setup()
    ms = {(w, k): [] for w in WORKLOADS for k in SCHEMAS}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(RUNS):
                for name, text in WORKLOADS.items():
                    paths = []
                    for key, schema in SCHEMAS.items():
                        paths.append(Path(tmp) / f"{name}-{schema}.sql")
                        paths[-1].write_text(text.replace("S.", schema + "."))
                    found = claim_ms(paths)
                    for key, schema in SCHEMAS.items():
                        ms[name, key].append(found[f"{name}-{schema}"])
    finally:
        common.drop_db(DB)
    print(f"the claim statement, mean ms per run ({RUNS} runs of {SECONDS} s, the two trees at random in each), "
          f"load {os.getloadavg()[0]:.1f}")
    for name in WORKLOADS:
        base, this = ms[name, "baseline"], ms[name, "this tree"]
        ratio = statistics.median(t / b for t, b in zip(this, base))
        print(f"  {name:9s} baseline  {statistics.median(base):6.3f} ({' '.join(f'{v:.3f}' for v in base)})")
        print(f"  {'':9s} this tree {statistics.median(this):6.3f} ({' '.join(f'{v:.3f}' for v in this)})  ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
