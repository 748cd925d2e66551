"""Benchmark (not a test): what the role model without BYPASSRLS costs (issue 34). `python -m bench.role_model_cost`
against the cluster named by PG* (`.ci/with-cluster`, the extension installed there; PGBIN names its pgbench).

One database: CREATE EXTENSION and sql/roles.sql (tables owned by broker_admin, each with its policy
broker_admin_all), an enqueue login (member of broker_enqueue) and a runtime login (member of broker_runtime),
READY pending jobs. Two workloads, each one transaction rolled back (so every run sees the same table), one
pgbench client, prepared statements: a per-row enqueue as the enqueue login (`broker_add_job`, whose insert
policies and triggers run) and a claim of one SQL job as the runtime login (`broker_get`, SECURITY DEFINER: it
reads as broker_admin). The two models alternate run by run: "BYPASSRLS" gives broker_admin BYPASSRLS back (what
versions before 0.3.0 did: its policies are then ignored), "policies" takes it away (0.3.0: broker_admin reads
through broker_admin_all). BENCH_ROLE_SECONDS (5) per run, BENCH_ROLE_RUNS (5) runs of each. Prints the mean
latency of the measured statement per run, the medians and the median ratio (policies over BYPASSRLS).
Figures in docs/benchmarks.md ("No BYPASSRLS (issue 34)").
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from . import common

SECONDS = common.env_int("BENCH_ROLE_SECONDS", 5)
RUNS = common.env_int("BENCH_ROLE_RUNS", 5)
READY = 2000
DB = "bench_role_model"
APP, RUNNER = "bench_role_app", "bench_role_runner"
WORKLOADS = {  # workload: (login, script); the measured statement is the one that starts with SELECT j
    "enqueue": (APP, "BEGIN;\nSELECT j.job_id FROM broker.broker_add_job('noop', 'SELECT 1') AS j;\nROLLBACK;\n"),
    "claim": (RUNNER, "BEGIN;\nSELECT j.job_id FROM broker.broker_get(1, NULL, NULL, 1, gen_random_uuid()) AS j;\n"
                      "ROLLBACK;\n"),
}
MEASURED = re.compile(r"\s+([0-9.]+)\s+\d+\s+SELECT j\.job_id")
MODELS = {"BYPASSRLS": "ALTER ROLE broker_admin BYPASSRLS", "policies": "ALTER ROLE broker_admin NOBYPASSRLS"}


def setup() -> None:
    roles = (common.ROOT / "sql" / "roles.sql").read_text()
    common.create_db(DB, None, "CREATE EXTENSION pgsql_broker")
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-d", DB], input=roles, text=True, check=True,
                   stdout=subprocess.DEVNULL)
    common.sql(DB, f"DROP ROLE IF EXISTS {APP}", f"DROP ROLE IF EXISTS {RUNNER}",
               f"CREATE ROLE {APP} LOGIN IN ROLE broker_enqueue", f"CREATE ROLE {RUNNER} LOGIN IN ROLE broker_runtime",
               f"SET ROLE {APP}",
               f"SELECT count(a.job_id) FROM generate_series(1, {READY}) AS g, "
               f"LATERAL broker.broker_add_job('noop', 'SELECT ' || g) AS a",
               "RESET ROLE", "VACUUM ANALYZE")


def mean_ms(login: str, path: Path) -> float:
    done = subprocess.run([common.PGBENCH, "-n", "-M", "prepared", "-c", "1", "-T", str(SECONDS), "-r", "-U", login,
                           "-f", str(path), DB], capture_output=True, text=True)
    found = MEASURED.findall(done.stdout)
    if done.returncode != 0 or len(found) != 1:
        raise RuntimeError(f"pgbench failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n{done.stdout}")
    return float(found[0])


def main() -> None:
    setup()
    ms = {(w, m): [] for w in WORKLOADS for m in MODELS}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(RUNS):
                for name, (login, text) in WORKLOADS.items():
                    path = Path(tmp) / f"{name}.sql"
                    path.write_text(text)
                    # alternate which model goes first, so neither always meets a warmer cache
                    for model in (list(MODELS) if run % 2 == 0 else list(reversed(MODELS))):
                        common.sql("postgres", MODELS[model])
                        ms[name, model].append(mean_ms(login, path))
    finally:
        common.sql("postgres", MODELS["policies"])
        common.drop_db(DB)
        common.sql("postgres", f"DROP ROLE IF EXISTS {APP}", f"DROP ROLE IF EXISTS {RUNNER}")
    print(f"mean ms of the measured statement per run ({RUNS} runs of {SECONDS} s per model, alternating), "
          f"load {os.getloadavg()[0]:.1f}")
    for name in WORKLOADS:
        old, new = ms[name, "BYPASSRLS"], ms[name, "policies"]
        ratio = statistics.median(n / o for n, o in zip(new, old))
        print(f"  {name:8s} BYPASSRLS {statistics.median(old):6.3f} ({' '.join(f'{v:.3f}' for v in old)})")
        print(f"  {'':8s} policies  {statistics.median(new):6.3f} ({' '.join(f'{v:.3f}' for v in new)})  ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
