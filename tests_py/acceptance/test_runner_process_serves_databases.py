"""The runner as a real process against the real cluster: NOTIFY and polling, graceful and hard
stops, standby takeover, two databases, crashes, a server restart, metrics."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from prometheus_client.parser import text_string_to_metric_families

from pgsql_broker.states import JobState
from conftest import add_job, connect
from job_checks import finished, wait_until
from runner_process import db_dsn


def test_jobs_run_on_notify_and_also_when_every_notify_is_lost(db, start):
    # an hour's poll timer: only NOTIFY can make the first job run within the wait below
    runner = start(db, extra=("--queue-timer-sec", "3600"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        time.sleep(0.5)  # the workers have drained the empty queues and wait
        job = add_job(conn, "woken", "SELECT 1")
    wait_until(lambda: finished(db, job), timeout=60, what="the job woken by NOTIFY")
    runner.kill()

    # no NOTIFY at all (broker_add_job's own switch suppresses it): the poll timer finds the job
    runner = start(db, extra=("--queue-timer-sec", "1"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        listener = connect(db)
        listener.execute("LISTEN pgsql_broker")
        with conn.transaction():
            conn.execute("SELECT set_config('broker.defer_notify', 'on', true)")
            silent = conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) "
                                  "VALUES ('silent', 'silent', 'SELECT 1') RETURNING job_id").fetchone()[0]
        assert [n for n in listener.notifies(timeout=0.3)] == []  # really nothing was sent
    wait_until(lambda: finished(db, silent), timeout=60, what="the job found by polling")


def test_sigterm_lets_the_running_job_finish_and_exits_zero(db, start):
    runner = start(db)
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        job = add_job(conn, "slow", "SELECT pg_sleep(2)")
    runner.wait_for(lambda r: any(d["running"] for d in r.state()["databases"]), what="the job to start")
    runner.signal(signal.SIGTERM)
    assert runner.wait(30) == 0
    with connect(db) as conn:
        assert conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone() == (2,)
        assert conn.execute("SELECT status FROM broker.broker_queueinstance").fetchall() == [("stopped",)]


def test_one_runner_serves_two_databases_and_a_standby_takes_over(db, template_db, start):
    other = f"{db}_b"
    with connect("postgres") as admin:
        admin.execute(f'CREATE DATABASE "{other}" TEMPLATE "{template_db}"')
        admin.execute(f'GRANT CREATE ON DATABASE "{other}" TO broker_admin')
    try:
        first = start(db, other, name="first")
        first.wait_for(lambda r: r.role(db) == "active" and r.role(other) == "active", what="both active")
        second = start(db, name="second")
        second.wait_for(lambda r: r.role(db) == "standby", what="standby")
        with connect(db) as a, connect(other) as b:
            ja, jb = add_job(a, "in a", "SELECT 1"), add_job(b, "in b", "SELECT 1")
            a.execute("SELECT broker.broker_add_schedule('nightly', '30 2 * * *', 'SELECT 1', 'Europe/Berlin')")
        wait_until(lambda: finished(db, ja) and finished(other, jb), what="jobs in both databases")
        assert second.role(db) == "standby"
        status = subprocess.run([sys.executable, "-m", "pgsql_broker", "status", "--dsn", db_dsn(db)],
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert "active instance" in status.stdout and "first on" in status.stdout
        assert "standby runners: 1" in status.stdout
        assert "schedule 'nightly' '30 2 * * *' (Europe/Berlin): next " in status.stdout, status.stdout

        first.kill()  # SIGKILL: no clean shutdown, the session (and its lock) just goes away
        second.wait_for(lambda r: r.role(db) == "active", timeout=60, what="the standby to take over")
        with connect(db) as a:
            jc = add_job(a, "after takeover", "SELECT 1")
        wait_until(lambda: finished(db, jc), what="a job run by the new active instance")
        with connect(db) as a:
            statuses = [r[0] for r in a.execute("SELECT status FROM broker.broker_queueinstance ORDER BY instance_id")]
        assert statuses == ["dead", "active"]
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{other}" WITH (FORCE)')


def test_crash_safety_under_repeated_sigkill_and_terminated_backends(db, start):
    with connect(db) as conn:
        conn.execute("CREATE TABLE public.effects (job bigint)")
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        # 10 ms a job: 1,500 jobs on 2 queues outlast the kill rounds (the batched runner drained
        # them with 2 ms a job before the first kill)
        conn.execute("SELECT broker.broker_add_job('row ' || i, 'INSERT INTO public.effects SELECT ' || i || '; "
                     "SELECT pg_sleep(0.01)', 1 + i % 2, p_max_attempts => 1000) FROM generate_series(1, 1500) i")
    rng = random.Random(7)
    fast = ("--queue-count", "2", "--stale-job-recovery-sec", "0.5", "--queue-timer-sec", "0.5", "--lease-seconds", "2")
    for round_ in range(6):
        runner = start(db, extra=fast, name=f"crash{round_}")
        runner.wait_for(lambda r: r.role(db) == "active", what="active")
        time.sleep(rng.uniform(0.5, 1.5))
        if round_ % 2:
            with connect(db) as conn:  # kill the runner's backends under it
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND application_name LIKE 'crash%%'")
            time.sleep(rng.uniform(0.3, 1.0))
        runner.kill()
    runner = start(db, extra=fast, name="final")
    with connect(db) as conn:
        wait_until(lambda: conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2").fetchone()[0] == 0,
                   timeout=120, what="every job to finish")
        assert conn.execute("SELECT complete_status, count(*) FROM broker.broker_jobs GROUP BY 1").fetchall() == [(JobState.COMPLETED, 1500)]
        assert conn.execute("SELECT count(*), count(DISTINCT job), min(job), max(job) FROM public.effects").fetchone() == (
            1500, 1500, 1, 1500)  # every effect exactly once
        # and the kills really hit jobs in flight: some needed more than one run (a killed runner's claims come back
        # uncounted, as interrupted: its instance is gone; a backend terminated under a live runner may count)
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE attempts > 1 OR interruptions > 0"
                            ).fetchone()[0] > 0


def test_the_runner_reconnects_after_a_server_restart(db, start):
    # short leases: jobs cut off by the restart come back fast
    runner = start(db, extra=("--queue-timer-sec", "0.5", "--stale-job-recovery-sec", "0.5", "--lease-seconds", "2"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        conn.execute("CREATE TABLE public.effects (job bigint)")
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        conn.execute("SELECT broker.broker_add_job('r' || i, 'INSERT INTO public.effects VALUES (' || i || ')', "
                     "p_max_attempts => 100) FROM generate_series(1, 200) i")
    data = os.path.join(os.environ["PGBROKER_TEST_CLUSTER_DIR"], "data")
    pg_ctl = [os.path.join(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"), "pg_ctl"), "-D", data, "-w",
              "-m", "fast", "restart", "-l", os.path.join(os.environ["PGBROKER_TEST_CLUSTER_DIR"], "server.log")]
    if os.geteuid() == 0:
        pg_ctl = ["runuser", "-u", "postgres", "--"] + pg_ctl
    subprocess.run(pg_ctl, check=True, capture_output=True)
    with connect(db) as conn:
        wait_until(lambda: conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2").fetchone()[0] == 0,
                   timeout=90, what="the jobs to finish after the restart")
        assert conn.execute("SELECT count(*), count(DISTINCT job) FROM public.effects").fetchone() == (200, 200)
    runner.wait_for(lambda r: r.role(db) == "active", what="active again")
    assert '"database unavailable, retrying with backoff"' in runner.log() or "retrying" in runner.log()


def test_metrics_parse(db, start):
    runner = start(db, extra=("--queue-depth-poll-sec", "0.2"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        ok = add_job(conn, "fine", "SELECT 1")
        bad = add_job(conn, "broken", "SELECT 1/0")
        add_job(conn, "waiting", "SELECT 1", job_queue=3, run_after=None, depends_on_job_ids=None,
                job_group="w", depends_on_groups=["nothing-yet"])
    wait_until(lambda: finished(db, ok) and finished(db, bad), what="both jobs")
    time.sleep(0.5)
    families = {f.name: f for f in text_string_to_metric_families(runner.get("/metrics")[1].decode())}
    value = lambda family, **labels: next(s.value for s in families[family].samples  # noqa: E731
                                          if all(s.labels.get(k) == v for k, v in labels.items()) and
                                          s.name.endswith("_total"))
    assert value("broker_jobs_completed", database=db, queue="1") == 1
    assert value("broker_jobs_failed", database=db, queue="1") == 1
    assert {"broker_job_duration_seconds", "broker_claim_duration_seconds", "broker_queue_depth",
            "broker_instance_active", "broker_listen_connected"} <= set(families)
    active = [s.value for s in families["broker_instance_active"].samples if s.labels["database"] == db]
    assert active == [1.0]
    assert runner.get("/healthz")[0] == 200


def test_dashboard_in_headless_chromium_shows_a_failed_jobs_error(db, start, tmp_path):
    chromium = "/usr/bin/chromium"
    assert os.path.exists(chromium), "make test installs Debian's chromium"
    runner = start(db, extra=("--queue-depth-poll-sec", "0.2"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        add_job(conn, "nightly import", "SELECT 1")
        failing = add_job(conn, "broken report", "SELECT * FROM missing_table_for_the_dashboard")
        add_job(conn, "later", "SELECT 1", run_after=None, job_queue=2, depends_on_groups=["nightly import"])
    wait_until(lambda: finished(db, failing), what="the failing job")
    time.sleep(0.5)
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=5000", "--window-size=1280,1500"]
    dom = subprocess.run([*flags, "--dump-dom", runner.url("/")], capture_output=True, text=True, timeout=120).stdout
    assert 'relation "missing_table_for_the_dashboard" does not exist' in dom
    assert "broken report" in dom and ">active<" in dom
    shot = tmp_path / "dashboard.png"
    subprocess.run([*flags, f"--screenshot={shot}", runner.url("/")], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


def test_the_library_api_runs_a_broker_inside_another_application(db):
    import asyncio
    import threading

    from pgsql_broker import Broker, enqueue, load_settings
    from runner_process import db_dsn

    settings = load_settings(env={}, dsns=[db_dsn(db)], flags={"metrics_enabled": False, "queue_timer_sec": 0.2,
                                                                "allow_privileged_login": True})  # as the test superuser
    broker = Broker(settings)
    thread = threading.Thread(target=lambda: asyncio.run(broker.run()), daemon=True)
    thread.start()
    with connect(db) as conn:
        job = enqueue(conn, "from the library", "SELECT 1", job_queue=2, max_attempts=3)
        assert conn.execute("SELECT job_queue, max_attempts FROM broker.broker_jobs WHERE job_id = %s",
                            (job,)).fetchone() == (2, 3)
    wait_until(lambda: finished(db, job), what="the job")
    broker.stop()
    thread.join(30)
    assert not thread.is_alive()


def test_a_database_without_the_schema_is_reported_with_what_to_run(empty_db, start):
    runner = start(empty_db)
    runner.wait_for(lambda r: "run `pgsql-broker install`" in r.log(), what="the schema check")
    assert runner.role(empty_db) == "disconnected"
    assert "has pgsql_broker schema none" in runner.state()["databases"][0]["error"]
