"""pgsql-broker jobs list|show|cancel|retry, queues pause|resume (a queue or a task name), purge: real processes on a real database. Tables
for people, --json for scripts; a failure is one line on stderr (exit 1), a bad argument exit 2, never a
traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import add_job, connect, job_status
from runner_process import db_dsn
from tenant_logins import enqueue_as, tenant_logins
from pgsql_broker.states import JobState


def cli(db: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgsql_broker", *args, "--dsn", db_dsn(db)],
                          capture_output=True, text=True, timeout=60)


def run_next(conn, queue: int = 1) -> None:
    """Run the next job of a queue as the runner does (broker_run_batch)."""
    conn.execute("SELECT broker.broker_run_batch(array_agg(job_id), array_agg(lease_token)) FROM broker.broker_get(%s)",
                 (queue,))


def test_list_and_show_a_dag_with_its_attempts(db):
    with connect(db) as conn:
        conn.execute("CREATE TABLE t (n int)")
        first = add_job(conn, "first", "INSERT INTO t VALUES (1), (2)", job_group="first")
        broken = add_job(conn, "broken", "SELECT 1/0", depends_on_groups=["first"], job_group="broken")
        after = add_job(conn, "after", "SELECT 1", depends_on_groups=["broken"], concurrency_key="crm-api")
        conn.execute("SELECT broker.broker_set_tenant('acme'); SELECT broker.broker_add_job('acme job', 'SELECT 1', 2)")  # (its own queue: claims of queue 1 share by tenant)
        run_next(conn)
        run_next(conn)
    listed = cli(db, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["job_name"], r["state"]) for r in rows] == [("acme job", "pending"), ("after", "cancelled"),
                                                          ("broken", "failed"), ("first", "completed")]
    failed = json.loads(cli(db, "jobs", "list", "--json", "--state", "failed").stdout)
    assert [r["job_id"] for r in failed] == [broken]
    assert [r["job_name"] for r in json.loads(cli(db, "jobs", "list", "--json", "--tenant", "acme").stdout)] == ["acme job"]
    assert [r["job_name"] for r in json.loads(cli(db, "jobs", "list", "--json", "--name", "f%", "--limit", "5").stdout)] == ["first"]
    table = cli(db, "jobs", "list")
    assert table.returncode == 0 and "broken" in table.stdout and "division by zero" in table.stdout

    shown = cli(db, "jobs", "show", str(broken))
    assert shown.returncode == 0, shown.stderr
    assert f"job {broken} 'broken': failed" in shown.stdout
    assert "    SELECT 1/0" in shown.stdout
    assert "  waits on:\n    group 'first'" in shown.stdout
    assert f"job {after} 'after' (cancelled) via group 'broken'" in shown.stdout
    assert "#1 failed" in shown.stdout and "22012 division by zero" in shown.stdout
    assert "  concurrency: -\n" in shown.stdout
    assert "  concurrency: crm-api\n" in cli(db, "jobs", "show", str(after)).stdout
    detail = json.loads(cli(db, "jobs", "show", str(first), "--json").stdout)
    assert [(a["outcome"], a["command_status"], a["rows_affected"]) for a in detail["attempt_history"]] == [
        ("completed", "INSERT 0 2", 2)]
    assert detail["waited_on_by"][0]["job_id"] == broken and detail["state"] == "completed"


def test_cancel_retry_pause_and_purge(db):
    with connect(db) as conn:
        pending = add_job(conn, "pending", "SELECT 1", job_queue=2)
        fails = add_job(conn, "fails", "SELECT 1/0")
        run_next(conn)
    done = cli(db, "jobs", "cancel", str(pending), "--reason", "not today")
    assert done.returncode == 0 and "1 job(s) cancelled" in done.stdout, done.stderr
    again = cli(db, "jobs", "cancel", str(pending))
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.count("\n") == 1 and "SQLSTATE 55000" in again.stderr and "Traceback" not in again.stderr

    retried = cli(db, "jobs", "retry", str(fails), "--no-dependents", "--json")
    assert retried.returncode == 0 and json.loads(retried.stdout) == {"job_id": fails, "pending_again": 1}
    with connect(db) as conn:
        assert job_status(conn, fails) == JobState.PENDING
    refused = cli(db, "jobs", "retry", str(fails))
    assert refused.returncode == 1 and "only failed or cancelled jobs can be retried (SQLSTATE 55000)" in refused.stderr

    assert "queue 3: paused" in cli(db, "queues", "pause", "3").stdout
    assert "(no change)" in cli(db, "queues", "pause", "3").stdout
    with connect(db) as conn:
        assert conn.execute("SELECT job_queue, tenant_id FROM broker.broker_queue_pause").fetchall() == [(3, None)]
    assert json.loads(cli(db, "queues", "resume", "3", "--json").stdout) == {"queue": 3, "paused": False, "changed": True}
    assert "task send_email: paused" in cli(db, "queues", "pause", "--task", "send_email").stdout
    with connect(db) as conn:
        assert conn.execute("""SELECT q.task_name, p.tenant_id FROM broker.broker_queue_pause AS p
                                 JOIN broker.broker_task_queue AS q USING (job_queue)""").fetchall() == [("send_email", None)]
    with connect(db) as listener:
        listener.autocommit = True
        listener.execute("LISTEN pgsql_broker_task")
        assert json.loads(cli(db, "queues", "resume", "--task", "send_email", "--json").stdout) == {
            "task": "send_email", "paused": False, "changed": True}
        woken = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
        assert woken and woken[0].endswith("/" + str(task_queue_of(db, "send_email"))), woken   # its workers are woken

    purged = cli(db, "purge", "--older-than", "0 seconds", "--state", "cancelled")
    assert purged.returncode == 0 and "purged 1 finished job(s)" in purged.stdout, purged.stderr
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = %s", (pending,)).fetchone()[0] == 0


def task_queue_of(db, task: str) -> int:
    with connect(db) as conn:
        return conn.execute("SELECT job_queue FROM broker.broker_task_queue WHERE task_name = %s", (task,)).fetchone()[0]


def test_bad_arguments_exit_2_and_missing_jobs_1(db):
    for args in (("jobs", "show", "abc"), ("jobs", "list", "--state", "lost"), ("queues", "pause", "0"),
                 ("queues", "pause"), ("queues", "pause", "3", "--task", "x"), ("purge", "--older-than", "soon")):
        result = cli(db, *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
    missing = cli(db, "jobs", "show", "424242")
    assert missing.returncode == 1 and missing.stderr.strip().startswith("error: job 424242 does not exist")
    unknown = cli(db, "jobs", "retry", "424242")
    assert unknown.returncode == 1 and "(SQLSTATE P0002)" in unknown.stderr
    # without --dsn and PGBROKER_DSN: libpq's PGDATABASE, here the cluster's postgres database, without the broker
    nodb = subprocess.run([sys.executable, "-m", "pgsql_broker", "jobs", "list"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PGBROKER_DSN"} | {"PGDATABASE": "postgres"})
    assert nodb.returncode == 1 and nodb.stderr.count("\n") == 1 and "broker.broker_jobs" in nodb.stderr


def test_status_marks_paused_queues_for_a_tenant_and_for_the_runner(db):
    """Paused queues show wherever queues are shown: `status` as the tenant's own login marks its paused queue
    (its own pause, and one for every tenant where it has no job), as the runner's login too."""
    with tenant_logins(db, {"alice": "acme"}) as names:
        enqueue_as(db, names["alice"], "acme", "alice's job", "SELECT 1")
        alice = [sys.executable, "-m", "pgsql_broker", "--dsn", db_dsn(db, names["alice"])]
        paused = subprocess.run([*alice[:3], "queues", "pause", "1", "--tenant", "acme", *alice[3:]],
                                capture_output=True, text=True, timeout=60)
        assert paused.returncode == 0 and "queue 1: paused" in paused.stdout, paused.stderr
        assert "queue 4: paused" in cli(db, "queues", "pause", "4").stdout  # an administrator: every tenant

        def status_rows(login: str) -> list[list[str]]:
            out = subprocess.run([sys.executable, "-m", "pgsql_broker", "status", "--dsn", db_dsn(db, login)],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            return [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
        mine = status_rows(names["alice"])
        assert [(r[0], r[1], r[2], r[-1]) for r in mine if r[0] == "1"] == [("1", "acme", "1", "paused")], mine
        assert ("4", "acme", "paused") in [(r[0], r[1], r[-1]) for r in mine], mine
        runner = status_rows(names["runner"])
        assert [(r[0], r[1], r[-1]) for r in runner] == [("1", "acme", "paused"), ("4", "0", "paused")], runner  # tenant ''
