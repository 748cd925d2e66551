"""More databases than session connections (issue 21's hundred databases, small): one runner, 8 databases,
max_open_conns_total = 4 (3 session slots and a worker connection). The databases take turns: each one is
registered (active or parked), every job of every database runs, the runner never holds more than its cap, a
database resumes its own instance at every visit (one instance row per database over the whole run, also in
a database another runner serves meanwhile), and the stop leaves no instance parked."""
from __future__ import annotations

import signal
import time

import psycopg
import pytest

from own_cluster import OwnCluster
from runner_process import Runner, free_port

DATABASES, CAP, JOBS = 8, 4, 5


@pytest.fixture
def cluster():
    own = OwnCluster(max_connections=30, port=free_port())
    yield own
    own.stop()


def wait_until(predicate, timeout: float, what: str, runner: Runner) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runner.proc.poll() is not None:
            raise AssertionError(f"runner exited waiting for {what}:\n{runner.log()[-3000:]}")
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}:\n{runner.log()[-3000:]}")


def instances(cluster: OwnCluster, db: str) -> list[tuple]:
    with cluster.connect(db) as conn:
        return conn.execute("SELECT instance_id, status, instance_name FROM broker.broker_queueinstance "
                            "ORDER BY instance_id").fetchall()


def runner_backends(monitor) -> int:
    monitor.execute("SELECT pg_stat_clear_snapshot()")
    return monitor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'turns:%' "
                           "OR application_name LIKE 'pgsql_broker job %'").fetchone()[0]


def test_databases_take_turns_and_all_their_jobs_run(cluster, tmp_path):
    names = cluster.databases_with_broker(DATABASES)
    extra = [arg for db in names for arg in ("--dsn", cluster.dsn(db))]
    runner = Runner(log_dir=tmp_path, name="turns", extra=(
        *extra, "--max-open-conns-total", str(CAP), "--parked-visit-sec", "0.5", "--queue-timer-sec", "0.5",
        "--worker-idle-timeout-sec", "1"))
    monitor = cluster.connect("postgres")
    try:
        most = 0

        def every_database_has_its_instance() -> bool:
            nonlocal most
            most = max(most, runner_backends(monitor))
            return all(any(status in ("active", "parked") for _, status, _ in instances(cluster, db)) for db in names)
        wait_until(every_database_has_its_instance, 60, "an instance in every database", runner)
        assert "more databases than session connections" in runner.log()
        assert {d["role"] for d in runner.state()["databases"]} <= {"active", "parked"}

        for db in names:  # enqueued while most databases are parked: no NOTIFY reaches those
            with cluster.connect(db) as conn:
                conn.execute("CREATE TABLE effects (n int)")
                conn.execute("SELECT broker.broker_add_job('j' || g, 'INSERT INTO effects VALUES (' || g || ')', "
                             "p_job_queue => 1 + g %% 2) FROM generate_series(1, %s) AS g", (JOBS,))

        def all_ran() -> bool:
            nonlocal most
            most = max(most, runner_backends(monitor))
            done = 0
            for db in names:
                with cluster.connect(db) as conn:
                    done += conn.execute("SELECT count(*) FROM effects").fetchone()[0]
            return done == DATABASES * JOBS
        wait_until(all_ran, 90, "every database's jobs", runner)
        # the cap holds (a closed connection's backend may be listed a moment beside its replacement)
        assert most <= CAP + 2, most
        assert "too many clients" not in runner.log()
        for db in names:
            rows = instances(cluster, db)
            assert len(rows) == 1, (db, rows)  # each visit resumed the same instance
            with cluster.connect(db) as conn:
                assert conn.execute("SELECT count(*) FILTER (WHERE complete_status = 2), count(*) "
                                    "FROM broker.broker_jobs").fetchone() == (JOBS, JOBS)

        # another runner takes one database over between two visits: the turns runner stands by there
        taken = names[0]
        with cluster.connect(taken) as other:
            def register_between_visits() -> bool:
                try:
                    other.execute("SELECT broker.broker_register_instance('other')")
                    return True
                except psycopg.errors.LockNotAvailable:  # (a visit is on: try again once it parked)
                    return False
            wait_until(register_between_visits, 60, "registering while the database is parked", runner)
            wait_until(lambda: runner.role(taken) == "standby", 60, "the turns runner standing by", runner)
            assert [r[1] for r in instances(cluster, taken)] == ["stopped", "active"]
            with cluster.connect(taken) as conn:
                conn.execute("SELECT broker.broker_add_job('while-taken', 'SELECT 1')")
            other.execute("SELECT broker.broker_shutdown_instance(max(instance_id)) FROM broker.broker_queueinstance")
        wait_until(lambda: instances(cluster, taken)[-1][1] in ("active", "parked") and len(instances(cluster, taken)) == 3,
                   60, "the turns runner registering again", runner)
        with cluster.connect(taken) as conn:
            wait_until(lambda: conn.execute("SELECT complete_status FROM broker.broker_jobs "
                                            "WHERE job_name = 'while-taken'").fetchone()[0] == 2,
                       60, "the job enqueued while another runner held the database", runner)

        runner.signal(signal.SIGTERM)
        assert runner.wait(60) == 0
        for db in names:
            assert {status for _, status, name in instances(cluster, db) if name == "turns"} <= {"stopped"}, db
    finally:
        monitor.close()
        runner.kill()
