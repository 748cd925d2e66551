"""A server restart costs no job: while ~1,000 jobs drain (max_attempts 1), the server is restarted three
times with -m immediate (every backend dies at once, as in a crash) and once with -m fast, each time while
the runner holds claims it has not started. Every job completes exactly once: none is failed or cancelled.

A job claimed before the server's last start cannot be running any more (the restart ended every session):
it goes back to pending without an attempt counted (the restart rule), and the runner hands back the claims
it had not started once it can connect again."""
from __future__ import annotations

from drain import (  # noqa: F401 (the fixtures)
    DB, assert_every_job_completed_once, enqueue_drain, progress, runner_flags, runner_login,
    statuses, tcp_cluster, wait)

JOBS = 1000


def test_a_server_restart_costs_no_job(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    enqueue_drain(tcp_cluster, JOBS)
    runner = start(extra=("--dsn", tcp_cluster.tcp_dsn(DB, runner_login), *runner_flags()), user=runner_login,
                   name="restarts")
    for mode in ("immediate", "immediate", "fast", "immediate"):
        progress(tcp_cluster, 30, 120, f"the restart -m {mode}", runner)
        # claims held beyond what the workers' transactions are running: a worker's buffer
        wait(lambda: statuses(tcp_cluster)["running"] > 2, 60, "claims held in a worker's buffer", runner)
        tcp_cluster.restart(mode, down_seconds=2)
    assert_every_job_completed_once(tcp_cluster, JOBS, 180, runner)
    assert runner.proc.poll() is None
