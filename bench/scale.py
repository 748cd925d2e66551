"""One runner for many databases of one server (not a test; workload `scale`).

N databases (BENCH_SCALE_DATABASES, default 100) from the broker template on the cluster as it is
(`make bench`: max_connections = 100), one pgbroker-runner for all of them with max_open_conns_total =
max_connections - BENCH_SCALE_HEADROOM (5: the harness's own connections): when that is fewer session
connections than databases, the databases take turns (run/rota.py). Reported, honestly whatever
happens (every wait is bounded): how many databases have their instance (active, or parked between two
visits), how many of JOBS jobs per database ran, and then, over IDLE_SEC seconds of idling: new sessions per
second (pg_stat_database.sessions),
the server's CPU (utime + stime of the postmaster, of its children alive, and of those it reaped, from
/proc), the runner's RSS, its connections, and the connections the server refused ("too many clients"
in the server log, while the runner ran); last, the wait from enqueue to start of one job in each database
(created_at to started_at), which for a parked database is the wait for its next visit.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psycopg

from . import common

N_DATABASES = common.env_int("BENCH_SCALE_DATABASES", 100)
JOBS = common.env_int("BENCH_SCALE_JOBS", 10)
IDLE_SEC = common.env_float("BENCH_SCALE_IDLE_SEC", 60)
WAIT_SEC = common.env_float("BENCH_SCALE_WAIT_SEC", 120)
HEADROOM = common.env_int("BENCH_SCALE_HEADROOM", 5)
PREFIX = "bench_scale_"
TICK = os.sysconf("SC_CLK_TCK")
REFUSED = "sorry, too many clients already"


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the 3rd on (state, ppid, ...)


def server_cpu_seconds(postmaster: int) -> float:
    """CPU of the whole server: the postmaster's own and reaped children's (cutime, cstime), plus every
    live child's utime and stime."""
    own = _stat(postmaster)
    total = sum(int(v) for v in own[11:15])  # utime stime cutime cstime
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
    return total / TICK


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _sessions(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT coalesce(sum(sessions), 0)::bigint FROM pg_stat_database WHERE datname LIKE %s", (PREFIX + "%",)).fetchone()[0]


def _refused(log: Path | None) -> int:
    return log.read_text(errors="replace").count(REFUSED) if log and log.exists() else 0


def _registered(dbs: list[str]) -> int:
    n = 0
    for db in dbs:
        try:
            n += common.scalar(db, "SELECT count(*) FROM broker.broker_queueinstance "
                                   "WHERE status IN ('active', 'parked')") > 0
        except psycopg.OperationalError:
            pass  # the server is full: counted as not registered now
    return n


def _done(dbs: list[str]) -> tuple[int, int]:
    """(jobs finished, databases with all their jobs finished)."""
    jobs = full = 0
    for db in dbs:
        try:
            n = common.scalar(db, "SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2")
        except psycopg.OperationalError:
            continue
        jobs += n
        full += n == JOBS
    return jobs, full


def _start_waits(dbs: list[str]) -> dict:
    """One job in every database at once; the enqueue-to-start waits (server clock), p50 and max, in seconds."""
    for db in dbs:
        common.sql(db, "SELECT broker.broker_add_job('scale-wait', 'SELECT 1')")
    _until(lambda: _started(dbs) == len(dbs), WAIT_SEC)
    waits = sorted(w for db in dbs for w in [common.scalar(
        db, "SELECT extract(epoch FROM started_at - created_at) FROM broker.broker_jobs WHERE job_name = 'scale-wait'")]
        if w is not None)
    if not waits:
        return {"start_wait_p50_s": None, "start_wait_max_s": None, "start_wait_jobs": 0}
    return {"start_wait_p50_s": round(float(waits[len(waits) // 2]), 3), "start_wait_max_s": round(float(waits[-1]), 3),
            "start_wait_jobs": len(waits)}


def _started(dbs: list[str]) -> int:
    return sum(common.scalar(db, "SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'scale-wait' "
                                 "AND started_at IS NOT NULL") for db in dbs)


def _until(predicate, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return round(time.monotonic() - t0, 1)
        time.sleep(1)
    return None


def run_one(template: str, run: int) -> dict:
    dbs = [f"{PREFIX}{i:03d}" for i in range(N_DATABASES)]
    for db in dbs:
        common.create_db(db, template)
    server_log = Path(os.environ["PGBROKER_TEST_CLUSTER_DIR"], "server.log") if os.environ.get(
        "PGBROKER_TEST_CLUSTER_DIR") else None
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        data_dir = admin.execute("SHOW data_directory").fetchone()[0]
        max_conn = int(admin.execute("SHOW max_connections").fetchone()[0])
    postmaster = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    refused_before = _refused(server_log)
    argv = [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
            "--metrics-host", "127.0.0.1", "--metrics-port", str(common.free_port()), "--log-level", "warning",
            "--allow-privileged-login",  # a throwaway cluster's superuser
            "--max-open-conns-total", str(max_conn - HEADROOM)]
    for db in dbs:
        argv += ["--dsn", f"dbname={db}"]
    worker = common.Worker(argv, cwd=common.ROOT)
    row: dict = {"databases": N_DATABASES, "max_connections": max_conn, "max_open_conns_total": max_conn - HEADROOM}
    try:
        row["all_registered_after_s"] = _until(lambda: _registered(dbs) == N_DATABASES, WAIT_SEC)
        row["registered"] = _registered(dbs)
        for db in dbs:
            try:
                common.sql(db, f"SELECT broker.broker_add_job('scale', 'SELECT 1', p_job_queue => 1 + g % 4) "
                               f"FROM generate_series(1, {JOBS}) AS g")
            except psycopg.OperationalError:
                pass  # refused: those jobs are missing from the count
        row["all_jobs_done_after_s"] = _until(lambda: _done(dbs)[1] == N_DATABASES, WAIT_SEC)
        row["jobs_done"], row["databases_served"] = _done(dbs)
        row["jobs_enqueued"] = N_DATABASES * JOBS
        time.sleep(min(IDLE_SEC, 15))  # the workers' idle timeouts pass: the idle state proper
        with psycopg.connect(dbname="postgres", autocommit=True) as admin:
            s0, c0, t0 = _sessions(admin), server_cpu_seconds(postmaster), time.monotonic()
            time.sleep(IDLE_SEC)
            s1, c1, t1 = _sessions(admin), server_cpu_seconds(postmaster), time.monotonic()
            row["idle_connections"] = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'pgsql-broker:%'").fetchone()[0]
        row["idle_sessions_per_s"] = round((s1 - s0) / (t1 - t0), 2)  # (this measurement connects to postgres only)
        row["idle_server_cpu_pct"] = round(100 * (c1 - c0) / (t1 - t0), 1)
        row["runner_rss_mib"] = round(rss_kib(worker.proc.pid) / 1024, 1)
        row.update(_start_waits(dbs))
        row["runner_alive"] = worker.proc.poll() is None
    finally:
        worker.stop()
        row["refused_connections"] = _refused(server_log) - refused_before
        for db in dbs:
            common.drop_db(db)
    print(f"  run {run + 1} scale    {row['registered']}/{N_DATABASES} databases registered, "
          f"{row['jobs_done']}/{row['jobs_enqueued']} jobs run ({row['databases_served']} databases fully), "
          f"{row['refused_connections']} connections refused; idle: {row.get('idle_connections')} connections, "
          f"{row.get('idle_sessions_per_s')} new sessions/s, server CPU {row.get('idle_server_cpu_pct')} %, "
          f"runner RSS {row.get('runner_rss_mib')} MiB; enqueue to start p50 {row.get('start_wait_p50_s')} s, "
          f"max {row.get('start_wait_max_s')} s", flush=True)
    return row


def run(template: str, runs: int) -> dict:
    out = {"runs": [run_one(template, r) for r in range(runs)]}
    out["median"] = common.median_of(out["runs"])
    return out
