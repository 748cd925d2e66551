"""A stop says what it does (issue 32): the first SIGINT logs how many jobs are running, the deadline
(shutdown_timeout_sec from now) and that a second signal interrupts them now; the second one says it interrupts,
and does: the job is pending again with its attempt not counted, and the runner exits 0. On a terminal the lines are also printed plainly."""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import sys

from conftest import add_job, connect
from job_checks import wait_until
from runner_process import db_dsn

# sleeps until the test opens its gate (a row in table gate): long enough for any stop, short once opened
GATED = "SELECT pg_sleep(CASE WHEN EXISTS (SELECT FROM gate) THEN 0 ELSE 600 END)"


def log_lines(runner) -> list[dict]:
    return [json.loads(line) for line in runner.log().splitlines() if line.startswith("{")]


def test_the_first_signal_says_what_happens_and_the_second_interrupts(db, start):
    with connect(db) as conn:
        conn.execute("CREATE TABLE gate ()")
        job = add_job(conn, "long", GATED)
    runner = start(db, extra=("--shutdown-timeout-sec", "3600"))
    runner.wait_for(lambda r: any(j["job_id"] == job and j["activity"] == "executing"
                                  for d in r.state()["databases"] for j in d["running"]), what="the job to run")

    runner.signal(signal.SIGINT)
    runner.wait_for(lambda r: any(e["msg"].startswith("signal received") for e in log_lines(r)), what="the stop")
    said = next(e for e in log_lines(runner) if e["msg"].startswith("signal received"))
    assert said["running_jobs"] == 1 and said["shutdown_timeout_sec"] == 3600
    assert "1 job running may finish for 3600 s from now, then it is interrupted (back to pending, attempt " \
           "not counted)" in said["msg"]
    assert "a second Ctrl-C or SIGTERM interrupts it now" in said["msg"]
    assert runner.proc.poll() is None  # it waits for the job

    runner.signal(signal.SIGINT)
    assert runner.wait(60) == 0  # far less than the deadline: interrupted at once
    second = [e for e in log_lines(runner) if e["msg"].startswith("second signal")]
    assert len(second) == 1 and "interrupting 1 job now (back to pending, attempt not counted)" in second[0]["msg"]
    with connect(db) as conn:
        assert conn.execute("SELECT complete_status, attempts, interruptions FROM broker.broker_jobs "
                            "WHERE job_id = %s", (job,)).fetchone() == (0, 0, 1)


def test_on_a_terminal_the_stop_prints_a_plain_line(db):
    """Run on a terminal (a pseudo-terminal here), the runner prints the stop's line plainly beside its log."""
    with connect(db) as conn:
        conn.execute("CREATE TABLE gate ()")
        add_job(conn, "long", GATED)
    pid, terminal = pty.fork()
    if pid == 0:  # the runner, its stdin, stdout and stderr on the terminal
        os.execv(sys.executable, [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                                  "--dsn", db_dsn(db), "--allow-privileged-login", "--no-metrics", "--log-level",
                                  "error"])
    output, status = bytearray(), None
    try:
        with connect(db) as conn:
            # the job sleeping in the server, not only claimed (complete_status 1): between the claim's commit and
            # the run's statement the runner counts it as claimed, not running, and a loaded machine widens that
            wait_until(lambda: conn.execute("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = %s "
                                            "AND wait_event = 'PgSleep')", (db,)).fetchone()[0], 60, "the job to run")
        for _ in range(2):
            os.kill(pid, signal.SIGINT)
            wait_until(lambda: read_some(terminal, output), 60, "a line on the terminal")
        _, status = os.waitpid(pid, 0)
    finally:
        if status is None:  # (the test failed before the runner exited)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
    lines = output.decode().splitlines()
    assert os.waitstatus_to_exitcode(status) == 0, lines
    assert lines[0].startswith("pgsql_broker: signal received, stopping: 1 job running may finish for 30 s"), lines
    assert "a second Ctrl-C or SIGTERM interrupts it now" in lines[0]
    assert lines[1] == "pgsql_broker: second signal: interrupting 1 job now (back to pending, attempt not counted)"


def read_some(terminal: int, output: bytearray) -> bool:
    """Whether a new line arrived on the terminal (read into `output`, without waiting)."""
    lines = output.count(b"\n")
    while select.select([terminal], [], [], 0)[0]:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the runner exited: the terminal is closed
            break
        if not chunk:
            break
        output += chunk.replace(b"\r\n", b"\n")
    return output.count(b"\n") > lines
