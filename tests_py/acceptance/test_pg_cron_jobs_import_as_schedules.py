"""pgsql-broker import pg-cron (issue 35) against the real pg_cron (Debian's postgresql-15-cron, preloaded in a
cluster of the test's own, as pg_cron requires): each job of the broker's database becomes a schedule with its
command, cron expression, username and active flag; what cannot be carried over is listed with why; a dry run
changes nothing; a second run changes nothing either."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from own_cluster import OwnCluster
from runner_process import free_port

# the real pg_cron, preloaded: a C extension, which exists here for PostgreSQL 15 only (postgresql-15-cron)
pytestmark = pytest.mark.pg_cron


@pytest.fixture(scope="module")
def cron_cluster():
    own = OwnCluster(max_connections=20, port=free_port(),
                     extra_conf="shared_preload_libraries = 'pg_cron'\ncron.database_name = 'postgres'")
    try:
        [app] = own.databases_with_broker(1)
        with own.connect(app) as conn:
            conn.execute("CREATE ROLE alice LOGIN; GRANT broker_enqueue TO alice; GRANT alice TO broker_runtime")
            conn.execute("SELECT broker.broker_allow_autonomous('alice')")
        with own.connect("postgres") as cron:
            cron.execute("CREATE EXTENSION pg_cron")
            for name, schedule, command, database, active in (
                    ("nightly-vacuum", "0 3 * * *", "VACUUM", app, True),
                    ("rollup", "*/5 * * * *", "SELECT 1", app, False),
                    ("elsewhere", "0 * * * *", "SELECT 2", "postgres", True)):
                cron.execute("SELECT cron.schedule_in_database(%s, %s, %s, %s, 'alice', %s)",
                             (name, schedule, command, database, active))
            unnamed = cron.execute("SELECT cron.schedule('15 4 * * 1', 'SELECT 3')").fetchone()[0]
            cron.execute("SELECT cron.alter_job(%s, database => %s, username => 'alice')", (unnamed, app))
            # what pg_cron 1.5 and later accept and 1.4 does not (seconds, '$'), and a job on another server
            # (nodeport's default, inet_server_port(), is NULL over the socket)
            cron.execute("""INSERT INTO cron.job (jobname, schedule, command, database, username, nodename, nodeport)
                            SELECT j.*, current_setting('port')::int FROM (VALUES
                                   ('fast', '30 seconds', 'SELECT 4', %(db)s, 'alice', 'localhost'),
                                   ('month-end', '0 0 $ * *', 'SELECT 5', %(db)s, 'alice', 'localhost'),
                                   ('remote', '0 1 * * *', 'SELECT 6', %(db)s, 'alice', 'db2.example')) AS j""",
                         {"db": app})
        yield own, app, unnamed
    finally:
        own.stop()


def importer(own: OwnCluster, app: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # (only the DSNs given count)
    return subprocess.run([sys.executable, "-m", "pgsql_broker", "import", "pg-cron", "--dsn", own.dsn(app),
                           "--cron-dsn", own.dsn("postgres"), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def schedules(own: OwnCluster, app: str) -> list[tuple]:
    with own.connect(app) as conn:
        return conn.execute("""SELECT schedule_name, cron_expr, execute_str, time_zone, run_as::text, enabled,
                                      autonomous, catch_up, tenant_id
                                 FROM broker.broker_schedule ORDER BY schedule_name""").fetchall()


def test_a_dry_run_plans_then_apply_creates_then_nothing_changes(cron_cluster):
    own, app, unnamed = cron_cluster
    plan = importer(own, app, "--tenant", "acme")
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[-1] == "3 to create, 0 unchanged, 4 skipped: a dry run, nothing changed (--apply creates them)."
    assert any(line.startswith("pg_cron job ") and "'nightly-vacuum' -> schedule 'nightly-vacuum': create "
               "('0 3 * * *' in GMT, run as alice, enabled, autonomous)" in line for line in lines), lines
    assert f"pg_cron job {unnamed} (unnamed) -> schedule 'pg_cron-{unnamed}': create" in plan.stdout
    assert f"'elsewhere': skip: runs in database 'postgres', not '{app}'" in plan.stdout
    assert "'fast': skip: '30 seconds' is pg_cron's interval in seconds" in plan.stdout
    assert "'month-end': skip: cron expression '0 0 $ * *'" in plan.stdout and "(SQLSTATE 22023)" in plan.stdout
    assert "'remote': skip: runs on another server (db2.example:" in plan.stdout
    assert schedules(own, app) == []

    applied = importer(own, app, "--tenant", "acme", "--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    result = json.loads(applied.stdout)
    assert (result["applied"], result["create"], result["unchanged"], result["skip"]) == (True, 3, 0, 4)
    assert schedules(own, app) == [
        ("nightly-vacuum", "0 3 * * *", "VACUUM", "GMT", "alice", True, True, "none", "acme"),
        (f"pg_cron-{unnamed}", "15 4 * * 1", "SELECT 3", "GMT", "alice", True, False, "none", "acme"),
        ("rollup", "*/5 * * * *", "SELECT 1", "GMT", "alice", False, False, "none", "acme")]

    again = importer(own, app, "--tenant", "acme", "--apply")
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "0 to create, 3 unchanged, 4 skipped: created."
    with own.connect(app) as conn:
        conn.execute("UPDATE broker.broker_schedule SET cron_expr = '0 5 * * *' WHERE schedule_name = 'rollup'")
    changed = importer(own, app, "--tenant", "acme", "--apply")
    assert "'rollup': skip: schedule 'rollup' exists with other settings: left as it is" in changed.stdout
    assert [s[1] for s in schedules(own, app) if s[0] == "rollup"] == ["0 5 * * *"]


def test_without_pg_cron_or_with_a_bad_time_zone_one_line(cron_cluster):
    own, app, _ = cron_cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    missing = subprocess.run([sys.executable, "-m", "pgsql_broker", "import", "pg-cron", "--dsn", own.dsn(app)],
                             capture_output=True, text=True, env=env, timeout=60)
    assert missing.returncode == 1 and missing.stderr == (
        f"error: database {app} has no table cron.job: name pg_cron's database with --cron-dsn "
        "(its cron.database_name, usually postgres)\n")
    zone = importer(own, app, "--time-zone", "Mars/Olympus", "--tenant", "beta")
    assert zone.returncode == 0 and "0 to create" in zone.stdout.splitlines()[-1]
    assert "'rollup': skip: " in zone.stdout and "Mars/Olympus" in zone.stdout
