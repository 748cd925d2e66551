"""How soon the runner resumes after each of several identical server outages (issue 32: the backoff must start
afresh after a session that worked, and every outage must be logged when it begins and when it ends).

The throwaway cluster of .ci/with-cluster (PGBROKER_TEST_CLUSTER_DIR, PGBIN) is stopped with `pg_ctl -m immediate`,
kept down BENCH_OUTAGE_DOWN_SEC seconds, and started again, BENCH_OUTAGES times, under one runner at its defaults.
For each outage: the seconds from the server's return (pg_ctl start returned) to the runner's next job
completed, and the runner's two log lines for it. A bench, not a test: it reports, it asserts nothing.

    .ci/with-cluster .venv/bin/python -m bench.outages
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from .common import create_broker_db, env_float, env_int, machine_facts, write_json

DB = "bench_outages"


def _pg_ctl(*args: str) -> None:
    data = Path(os.environ["PGBROKER_TEST_CLUSTER_DIR"]) / "data"
    cmd = [str(Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")) / "pg_ctl"), "-D", str(data), *args]
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=120)


def _job_done_after(t0: float, timeout: float = 120) -> float:
    """Enqueue a job once the server answers and return the seconds from t0 to its completion."""
    deadline = time.monotonic() + timeout
    job_id = None
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(dbname=DB, autocommit=True) as conn:
                if job_id is None:
                    job_id = conn.execute("SELECT job_id FROM broker.broker_add_job('probe', 'SELECT 1')").fetchone()[0]
                if conn.execute("SELECT complete_status = 2 FROM broker.broker_jobs WHERE job_id = %s",
                                (job_id,)).fetchone()[0]:
                    return time.monotonic() - t0
        except psycopg.OperationalError:
            pass
        time.sleep(0.05)
    raise RuntimeError("no job completed within the timeout after the outage")


def main() -> None:
    outages, down = env_int("BENCH_OUTAGES", 5), env_float("BENCH_OUTAGE_DOWN_SEC", 2.0)
    create_broker_db(DB)
    log_path = Path(tempfile.mkdtemp(prefix="bench_outages.")) / "runner.log"
    with open(log_path, "w") as log_file:
        runner = subprocess.Popen([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                                   "--dsn", f"dbname={DB}", "--allow-privileged-login", "--metrics-port", "0"],
                                  stdout=log_file, stderr=subprocess.STDOUT)
    resumed = []
    try:
        _job_done_after(time.monotonic())
        for _ in range(outages):
            _pg_ctl("-m", "immediate", "-w", "stop")
            time.sleep(down)
            _pg_ctl("-l", str(Path(os.environ["PGBROKER_TEST_CLUSTER_DIR"]) / "server.log"), "-w", "start")
            resumed.append(round(_job_done_after(time.monotonic()), 2))
    finally:
        runner.terminate()
        runner.wait(60)
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    begun = sum(1 for r in lines if r.get("msg", "").startswith("database unavailable"))
    ended = [r.get("outage_seconds") for r in lines if r.get("msg", "").startswith("database available again")]
    result = {"outages": outages, "down_sec": down, "seconds_from_return_to_a_job_done": resumed,
              "outages_logged_begun": begun, "outage_lengths_logged": ended, "machine": machine_facts()}
    print(json.dumps(result, indent=2))
    write_json("outages", result)


if __name__ == "__main__":
    main()
