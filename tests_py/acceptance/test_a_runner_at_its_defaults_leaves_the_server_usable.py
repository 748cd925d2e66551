"""A runner at its defaults leaves the server usable (issue 32): one runner on 40 databases of a server with
max_connections = 60 takes at most half of what the server gives logins without superuser, the databases
beyond that take turns, a job enqueued in every database completes, and while jobs run, applications still
connect."""
from __future__ import annotations

import json
import signal

import psycopg
import pytest

from own_cluster import OwnCluster
from runner_process import Runner, free_port

DATABASES, MAX_CONNECTIONS, APPLICATIONS = 40, 60, 10
JOB = "INSERT INTO effects VALUES (1); SELECT pg_sleep(1)"


@pytest.fixture
def cluster():
    own = OwnCluster(max_connections=MAX_CONNECTIONS, port=free_port())
    yield own
    own.stop()


def login_dsn(cluster: OwnCluster, db: str, user: str) -> str:
    return f"dbname={db} host={cluster.dir} port={cluster.port} user={user}"


def budget_line(runner: Runner) -> dict | None:
    return next((e for e in map(json.loads, filter(lambda x: x.startswith("{"), runner.log().splitlines()))
                 if e["msg"] == "connection budget"), None)


def runner_backends(monitor) -> tuple[int, int]:
    """The runner's backends (its sessions, workers and the jobs on them) and of those the jobs running now."""
    monitor.execute("SELECT pg_stat_clear_snapshot()")
    return monitor.execute("SELECT count(*), count(*) FILTER (WHERE application_name LIKE 'pgsql_broker job %%') "
                           "FROM pg_stat_activity WHERE usename = 'share_runner'").fetchone()


def test_one_runner_on_forty_databases_serves_them_all_and_leaves_room(cluster, tmp_path):
    names = cluster.databases_with_broker(DATABASES)
    with cluster.connect("postgres") as admin:
        admin.execute("CREATE ROLE share_runner LOGIN IN ROLE broker_runtime")  # as the runner should run
        admin.execute("CREATE ROLE share_app LOGIN")  # an application: no superuser, no reserved connections
        usable = admin.execute("SELECT current_setting('max_connections')::int "
                               "- current_setting('superuser_reserved_connections')::int "
                               "- coalesce(current_setting('reserved_connections', true), '0')::int").fetchone()[0]
    budget = usable // 2
    for db in names:
        with cluster.connect(db) as conn:
            conn.execute("CREATE TABLE effects (n int)")
    runner = Runner(log_dir=tmp_path, name="share", extra=tuple(
        arg for db in names for arg in ("--dsn", login_dsn(cluster, db, "share_runner"))))
    monitor = cluster.connect("postgres")
    most = 0

    def seen() -> tuple[int, int]:
        nonlocal most
        backends, jobs = runner_backends(monitor)
        most = max(most, backends)
        return backends, jobs
    try:
        runner.wait_for(lambda r: budget_line(r), 60, "the budget")
        line = budget_line(runner)
        assert (line["connections"], line["usable_on_server"], line["databases"]) == (budget, usable, DATABASES)
        assert "more databases than session connections" in runner.log()

        for db in names:
            with cluster.connect(db) as conn:
                conn.execute("SELECT broker.broker_add_job('sleep', %s)", (JOB,))

        # applications connect while the runner's jobs run
        runner.wait_for(lambda _: seen()[1] > 0, 120, "jobs running")
        applications = [psycopg.connect(login_dsn(cluster, "postgres", "share_app")) for _ in range(APPLICATIONS)]
        try:
            assert all(conn.execute("SELECT 1").fetchone() == (1,) for conn in applications)
            assert seen()[1] > 0  # (still running beside them)
        finally:
            for conn in applications:
                conn.close()

        def all_ran(_) -> bool:
            seen()
            done = 0
            for db in names:
                with cluster.connect(db) as conn:
                    done += conn.execute("SELECT count(*) FROM effects").fetchone()[0]
            return done == DATABASES
        runner.wait_for(all_ran, 300, "the job of every database")
        # within the budget (a closed connection's backend may be listed a moment beside its replacement)
        assert most <= budget + 2, (most, budget)
        assert "too many clients" not in runner.log()

        runner.signal(signal.SIGTERM)
        assert runner.wait(60) == 0
    finally:
        monitor.close()
        runner.kill()
