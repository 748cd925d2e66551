"""pgsql-broker schedules list|show|pause|resume|run-now: real processes on a real database. Fire times on the
schedule's own clock; run-now enqueues as a fire would (with the same NOTIFY) and leaves the plan alone; a
failure is one line on stderr (exit 1), a bad argument exit 2; another tenant's schedule is out of reach.
Fire times are set to fixed instants, so no outcome depends on the date."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

from conftest import connect
from runner_process import db_dsn
from tenant_logins import tenant_logins
from pgsql_broker.states import JobState


def cli(db: str, *args: str, user: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgsql_broker", *args, "--dsn", db_dsn(db, user)],
                          capture_output=True, text=True, timeout=60)


def add_schedules(conn) -> None:
    """nightly (Europe/Berlin, queue 2, fixed next and last fires: 2027-03-14 02:00 UTC = 03:00 +01:00 there, and
    the day before) and hourly (UTC, paused)."""
    conn.execute("SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'SELECT 1', p_time_zone => 'Europe/Berlin', "
                 "p_job_queue => 2)")
    conn.execute("SELECT broker.broker_add_schedule('hourly', '0 * * * *', 'SELECT 2', p_enabled => false)")
    conn.execute("UPDATE broker.broker_schedule SET next_fire_at = '2027-03-14 02:00+00', "
                 "last_fire_at = '2027-03-13 02:00+00' WHERE schedule_name = 'nightly'")


def test_list_and_show_fire_times_on_the_schedules_clock(db):
    with connect(db) as conn:
        add_schedules(conn)
    listed = cli(db, "schedules", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "cron", "time"]
    assert lines[1].split() == ["hourly", "0", "*", "*", "*", "*", "UTC", "paused", "-", "-"]
    assert lines[2].split() == ["nightly", "0", "3", "*", "*", "*", "Europe/Berlin", "enabled",
                                "2027-03-14", "03:00", "+01:00", "2027-03-13", "03:00", "+01:00"]
    rows = json.loads(cli(db, "schedules", "list", "--json").stdout)
    nightly = rows[1]
    assert (nightly["schedule_name"], nightly["state"], nightly["next_fire_in_zone"]) == (
        "nightly", "enabled", "2027-03-14 03:00 +01:00")
    assert datetime.fromisoformat(nightly["next_fire_at"]) == datetime(2027, 3, 14, 2, tzinfo=timezone.utc)

    shown = cli(db, "schedules", "show", "nightly")
    assert shown.returncode == 0, shown.stderr
    for line in ("schedule 'nightly': enabled", "  cron:         0 3 * * * in Europe/Berlin",
                 "  next fire:    2027-03-14 03:00 +01:00", "  last fire:    2027-03-13 03:00 +01:00",
                 "  queue:        2", "  overlap:      skip", "    SELECT 1", "  newest jobs: none"):
        assert line in shown.stdout.splitlines(), (line, shown.stdout)
    assert json.loads(cli(db, "schedules", "show", "hourly", "--json").stdout)["state"] == "paused"


def test_show_a_schedule_of_tasks(db):
    with connect(db) as conn:
        conn.execute("""SELECT broker.broker_add_task_schedule('digest', '0 7 * * *', 'send_digest', '{"kind": "daily"}')""")
    shown = cli(db, "schedules", "show", "digest")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    for line in ("  language:     task", "  task:         send_digest", "  args:", '    {"kind": "daily"}'):
        assert line in lines, (line, shown.stdout)
    assert "  sql:" not in lines
    assert json.loads(cli(db, "schedules", "show", "digest", "--json").stdout)["task"] == "send_digest"


def test_pause_resume_and_run_now(db):
    with connect(db) as conn:
        add_schedules(conn)
    assert cli(db, "schedules", "pause", "nightly").stdout == "schedule 'nightly': paused\n"
    assert cli(db, "schedules", "pause", "nightly").stdout == "schedule 'nightly': paused (no change)\n"

    with connect(db) as listener:
        heard: list[str] = []
        listener.add_notify_handler(lambda n: heard.append(n.payload))
        listener.execute("LISTEN pgsql_broker")
        ran = cli(db, "schedules", "run-now", "nightly", "--json")
        assert ran.returncode == 0, ran.stderr
        answer = json.loads(ran.stdout)
        listener.execute("SELECT 1")  # (the CLI committed and exited: its NOTIFY is delivered before this answer)
    assert answer["is_new"] is True and heard == [f"{db}/2"], heard
    with connect(db) as conn:
        job = conn.execute("SELECT complete_status, job_queue, schedule_id IS NOT NULL FROM broker.broker_jobs "
                           "WHERE job_id = %s", (answer["job_id"],)).fetchone()
        plan = conn.execute("SELECT enabled, next_fire_at, last_fire_at = '2027-03-13 02:00+00' FROM broker.broker_schedule "
                            "WHERE schedule_name = 'nightly'").fetchone()
    assert job == (JobState.PENDING, 2, True)
    assert plan == (False, None, True), "a paused schedule runs now and stays paused, its last fire unchanged"

    again = cli(db, "schedules", "run-now", "nightly")
    assert again.returncode == 0 and again.stdout == (
        f"schedule 'nightly': its job {answer['job_id']} is still unfinished (overlap skip): nothing enqueued\n")
    shown = cli(db, "schedules", "show", "nightly").stdout
    assert f"  last job:     {answer['job_id']} (pending)" in shown and f"job {answer['job_id']} pending" in shown and "by hand" in shown

    resumed = cli(db, "schedules", "resume", "nightly", "--json")
    assert resumed.returncode == 0, resumed.stderr
    with connect(db) as conn:
        next_at = conn.execute("SELECT next_fire_at FROM broker.broker_schedule WHERE schedule_name = 'nightly'").fetchone()[0]
    body = json.loads(resumed.stdout)
    assert (body["enabled"], body["changed"], datetime.fromisoformat(body["next_fire_at"])) == (True, True, next_at)


def test_errors_are_one_line_and_a_nonzero_exit(db):
    with connect(db) as conn:
        add_schedules(conn)
    for args in (("schedules", "run-now", "nope"), ("schedules", "pause", "nope"), ("schedules", "resume", "nope")):
        result = cli(db, *args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1 and "does not exist in tenant 'default' (SQLSTATE 42704)" in result.stderr
        assert result.stdout == ""
    missing = cli(db, "schedules", "show", "nope")
    assert missing.returncode == 1 and missing.stderr == "error: schedule 'nope' does not exist (for this login and tenant)\n"
    for args in (("schedules", "run-now"), ("schedules", "show", "nightly", "--jobs", "-1")):
        result = cli(db, *args)
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr)
    # without --dsn: libpq's environment (here a database without the broker): one line, exit 1
    nodb = subprocess.run([sys.executable, "-m", "pgsql_broker", "schedules", "list"], capture_output=True, text=True,
                          env={**os.environ, "PGDATABASE": "postgres"})
    assert nodb.returncode == 1 and nodb.stderr.count("\n") == 1 and "Traceback" not in nodb.stderr, nodb.stderr


def test_another_tenants_schedule_is_out_of_reach(db):
    """Strict tenancy: mallory (broker_enqueue, mapped to her tenant) names victor's tenant and schedule and finds
    nothing; victor runs his own."""
    with tenant_logins(db, {"victor": "acme", "mallory": "evil"}) as names:
        assert cli(db, "schedules", "list", "--tenant", "acme", user=names["mallory"]).stdout.endswith("(no schedules)\n")
        with connect(db, user=names["victor"]) as conn:
            conn.execute("SELECT broker.broker_add_schedule('payroll', '0 3 * * *', 'SELECT 1', p_tenant_id => 'acme')")
        refused = cli(db, "schedules", "run-now", "payroll", "--tenant", "acme", user=names["mallory"])
        assert refused.returncode == 1 and "schedule 'payroll' does not exist in tenant 'acme' (SQLSTATE 42704)" in refused.stderr
        listed = cli(db, "schedules", "list", "--tenant", "acme", "--json", user=names["mallory"])
        assert listed.returncode == 0 and json.loads(listed.stdout) == []
        ran = cli(db, "schedules", "run-now", "payroll", "--tenant", "acme", user=names["victor"])
        assert ran.returncode == 0 and "enqueued" in ran.stdout, ran.stderr
        with connect(db) as conn:
            assert conn.execute("SELECT tenant_id, enqueued_by FROM broker.broker_jobs").fetchall() == [
                ("acme", names["victor"])]
