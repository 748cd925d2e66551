"""Benchmark (not a test): where the drain's CPU goes, the runner's process against the server's.
`python -m bench.drain_cpu` against the cluster named by PG* (`.ci/with-cluster`): BENCH_CPU_JOBS (20,000)
`SELECT 1` jobs over 4 queues in a fresh database, drained by `pgbroker-runner` at its defaults; from the first
completion to the last: the drain rate, the CPU time (utime + stime, /proc) of the runner's process and of the
server's processes, the machine's busy time (/proc/stat) and the WAL written, each per job. BENCH_CPU_RUNS (3)
runs; with BENCH_BASELINE (a source tree, see bench/broker_workloads.py) each run is followed by one with that
tree's runner (its package first on PYTHONPATH) on this tree's SQL, so that the runner's share is compared
before and after in the same minutes. With BENCH_CPU_WHAT_IF (a file of SQL, e.g. bench/what_if/*.sql) each run is
also followed by one whose database ran that file before the drain: what a change of the SQL would give, measured
beside the code as it is. Figures in docs/benchmarks.md ("Where the drain's CPU goes").
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import psycopg

from . import common

JOBS = int(os.environ.get("BENCH_CPU_JOBS", "20000"))
RUNS = int(os.environ.get("BENCH_CPU_RUNS", "3"))
DB = "bench_drain_cpu"
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def server_cpu() -> dict[int, float]:
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if Path(f"/proc/{p}/comm").read_text().strip() == "postgres":
                    out[int(p)] = cpu(int(p))
            except OSError:
                pass
    return out


def busy() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK


def one_run(env: dict, what_if: str | None = None) -> dict:
    common.create_broker_db(DB)
    try:
        with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
            conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
                         "SELECT 'drain', 'drain', 'SELECT 1', 1 + g %% 4 FROM generate_series(1, %s) AS g", (JOBS,))
            if what_if:
                conn.execute(what_if)
            conn.execute("ANALYZE broker.broker_jobs")
            runner = common.start_runner(DB, env)
            try:
                left = JOBS
                while left == JOBS:  # (start-up is not counted)
                    left = conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2").fetchone()[0]
                    time.sleep(0.01)
                t0, r0, s0, b0 = time.monotonic(), cpu(runner.pid), server_cpu(), busy()
                w0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
                while conn.execute("SELECT EXISTS (SELECT FROM broker.broker_jobs WHERE complete_status < 2)").fetchone()[0]:
                    time.sleep(0.02)
                t1, r1, s1, b1 = time.monotonic(), cpu(runner.pid), server_cpu(), busy()
                wal = conn.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", (w0,)).fetchone()[0]
            finally:
                runner.terminate()
                runner.wait(60)
    finally:
        common.drop_db(DB)
    n = left  # the jobs drained while measured
    server = sum(v - s0.get(p, 0.0) for p, v in s1.items())
    return {"jobs_per_s": n / (t1 - t0), "runner_us": (r1 - r0) / n * 1e6, "server_us": server / n * 1e6,
            "busy_us": (b1 - b0) / n * 1e6, "wal_bytes": float(wal) / n}


def main() -> None:
    systems = {"this tree": (dict(os.environ), None)}
    if os.environ.get("BENCH_BASELINE"):
        tree = Path(os.environ["BENCH_BASELINE"]).resolve()
        systems[f"runner of {os.environ.get('BENCH_BASELINE_LABEL') or tree.name}"] = (
            {**os.environ, "PYTHONPATH": str(tree / "runner")}, None)
    if os.environ.get("BENCH_CPU_WHAT_IF"):
        path = Path(os.environ["BENCH_CPU_WHAT_IF"])
        systems[f"what if: {path.stem}"] = (dict(os.environ), path.read_text())
    results: dict[str, list[dict]] = {name: [] for name in systems}
    for r in range(RUNS):
        for name, (env, what_if) in systems.items():
            out = one_run(env, what_if)
            results[name].append(out)
            print(f"run {r + 1} {name:30s} " + ", ".join(f"{k} {v:,.0f}" for k, v in out.items()), flush=True)
    print(f"median of {RUNS}, per job drained (µs of CPU; busy: the whole machine), load {os.getloadavg()[0]:.1f}:")
    for name, runs in results.items():
        med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}
        print(f"  {name:30s} " + ", ".join(f"{k} {v:,.0f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
