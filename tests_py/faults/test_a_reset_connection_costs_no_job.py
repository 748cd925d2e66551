"""A reset connection costs no job: the runner reaches the server through a proxy that resets (RST) every
connection three times during a drain (max_attempts 1). The server stays up, so no restart rule helps: the
runner keeps the claims it had not started when its connections died and hands them back (no attempt
counted) once it connects again. Every job completes exactly once."""
from __future__ import annotations

from drain import (  # noqa: F401 (the fixtures)
    DB, assert_every_job_completed_once, enqueue_drain, progress, runner_flags, runner_login, tcp_cluster)
from proxy import Proxy

JOBS = 600


def test_a_reset_connection_costs_no_job(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    proxy = Proxy(tcp_cluster.port)
    try:
        enqueue_drain(tcp_cluster, JOBS)
        runner = start(extra=("--dsn", tcp_cluster.tcp_dsn(DB, runner_login, port=proxy.port), *runner_flags()),
                       user=runner_login, name="resets")
        for _ in range(3):
            progress(tcp_cluster, 30, 120, "a reset", runner)
            assert proxy.reset() >= 2  # the session and at least one worker
        assert_every_job_completed_once(tcp_cluster, JOBS, 180, runner)
        assert runner.proc.poll() is None
    finally:
        proxy.close()
