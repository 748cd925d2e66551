"""A connection budget that holds (issue 21): one runner serves 20 databases of a server started with
max_connections = 40. Every database gets registered and its jobs run, the runner never opens more than
--max-open-conns-total, and at idle it holds one connection per database and opens no new session: the window
is measured in the runner's own polls (each database's committed transactions), not in seconds."""
from __future__ import annotations

import time

import pytest

from own_cluster import OwnCluster
from runner_process import Runner, free_port

DATABASES = 20
CAP = 30  # 20 session connections and 10 worker connections


@pytest.fixture
def cluster():
    own = OwnCluster(max_connections=40, port=free_port())
    yield own
    own.stop()


def wait_until(predicate, timeout: float, what: str, runner: Runner, details=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runner.proc.poll() is not None:
            raise AssertionError(f"runner exited waiting for {what}:\n{runner.log()[-3000:]}")
        try:
            if predicate():
                return
        except OSError:  # (its HTTP port is not up yet)
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} {details()}:\n{runner.log()[-3000:]}")


def runner_backends(monitor) -> set[tuple]:
    """(pid, backend_start) of the runner's sessions, whatever database."""
    monitor.execute("SELECT pg_stat_clear_snapshot()")
    return set(monitor.execute("SELECT pid, backend_start, datname FROM pg_stat_activity "
                               "WHERE application_name LIKE 'budget:%' OR application_name LIKE 'pgsql_broker job %'"))


def polls(monitor, names: list[str]) -> dict[str, int]:
    """Committed transactions per database (the runner's poll commits one each queue_timer_sec)."""
    monitor.execute("SELECT pg_stat_clear_snapshot()")
    return dict(monitor.execute("SELECT datname, xact_commit FROM pg_stat_database WHERE datname = ANY (%s)",
                                (names,)).fetchall())


def test_twenty_databases_under_max_connections_40(cluster, tmp_path):
    names = cluster.databases_with_broker(DATABASES)
    extra = [arg for db in names for arg in ("--dsn", cluster.dsn(db))]
    runner = Runner(log_dir=tmp_path, name="budget", extra=(
        *extra, "--max-open-conns-total", str(CAP), "--queue-timer-sec", "0.5",
        "--worker-idle-timeout-sec", "1"))
    try:
        monitor = cluster.connect("postgres")
        wait_until(lambda: all(d["role"] == "active" for d in runner.state()["databases"])
                   and len(runner.state()["databases"]) == DATABASES, 60, "every database registered", runner)
        for db in names:  # ten jobs each, all at once: more work than connections
            with cluster.connect(db) as conn:
                conn.execute("CREATE TABLE effects (n int)")
                conn.execute("SELECT broker.broker_add_jobs((SELECT jsonb_agg(jsonb_build_object("
                             "'job_name', 'j' || g, 'execute_str', 'INSERT INTO effects VALUES (' || g || ')', "
                             "'job_queue', 1 + g % 4)) FROM generate_series(1, 10) AS g))")
        most = most_counted = 0

        def all_ran() -> bool:
            nonlocal most, most_counted
            most = max(most, len(runner_backends(monitor)))
            most_counted = max(most_counted, sum(d["connections"] for d in runner.state()["databases"]))
            done.clear()
            for db in names:
                with cluster.connect(db) as conn:
                    done[db] = conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2").fetchone()[0]
            return sum(done.values()) == 10 * DATABASES
        done: dict[str, int] = {}
        def unfinished() -> str:
            late = {db for db, n in done.items() if n < 10}
            return "\n".join(line for line in runner.log().splitlines()
                             if any(f'"{db}"' in line for db in late) and "UNSAFE" not in line)
        wait_until(all_ran, 60, "every database's jobs", runner, unfinished)
        assert most_counted <= CAP  # the runner's own count of its open connections
        # the server's view: a connection the pool closed (evicted at the cap for another database) may
        # still be listed for a moment while its backend exits, next to the one that replaced it
        assert most <= CAP + 2, most
        assert "too many clients" not in runner.log()

        # idle: the worker connections close, the session connections stay, and nothing new opens
        wait_until(lambda: len(runner_backends(monitor)) == DATABASES, 60, "one connection per database", runner)
        before, start = runner_backends(monitor), polls(monitor, names)
        wait_until(lambda: all(n >= start[db] + 3 for db, n in polls(monitor, names).items()), 90,
                   "three polls of every database", runner)
        assert runner_backends(monitor) == before  # the same sessions: none closed, none opened
        assert {d["connections"] for d in runner.state()["databases"]} == {1}
        monitor.close()
    finally:
        runner.kill()
