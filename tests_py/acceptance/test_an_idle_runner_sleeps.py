"""An idle runner sleeps between its timers: no job, no NOTIFY, and its process uses next to no CPU. The window is
measured in the runner's own polls (each database's committed transactions, one per queue_timer_sec), and the
runner's CPU time over it (/proc, utime + stime) is compared with the window's length: a session loop that waited
for NOTIFY with a zero timeout (a timer left in the past) took a whole core."""
from __future__ import annotations

import os
import time

from conftest import connect
from job_checks import wait_until

POLLS = 6


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def commits(monitor, db: str) -> int:
    monitor.execute("SELECT pg_stat_clear_snapshot()")
    return monitor.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (db,)).fetchone()[0]


def test_an_idle_runner_uses_next_to_no_cpu(db, start):
    runner = start(db, extra=("--queue-timer-sec", "0.5"))
    runner.wait_for(lambda r: r.role(db) == "active", what="the instance active")
    with connect("postgres") as monitor:
        first = commits(monitor, db)
        wait_until(lambda: commits(monitor, db) > first, 60, "the runner's first poll")
        start_cpu, started, start_commits = cpu_seconds(runner.proc.pid), time.monotonic(), commits(monitor, db)
        wait_until(lambda: commits(monitor, db) >= start_commits + POLLS, 120, f"{POLLS} more polls")
        used, window = cpu_seconds(runner.proc.pid) - start_cpu, time.monotonic() - started
    assert runner.proc.poll() is None, runner.log()[-3000:]
    # (a spinning session loop uses the whole window, whatever the machine's load gives it: a quarter is far above
    # what an idle runner needs and far below a spin on a machine that is not overloaded)
    assert used < 0.25 * window, f"{used:.2f} s of CPU in a {window:.2f} s idle window"
