"""A stalled network is noticed: the active runner reaches the server through a proxy that stops forwarding
(no RST, nothing closed) for 25 s during a drain; a standby runner is connected directly. The stalled runner
logs that it lost its connection, without being restarted; the standby takes over once the stalled runner's
session has ended; after the stall every job completes exactly once. The lease (15 s) is shorter than the
stall: the claims the stalled runner held and had not started are recovered by the standby once their lease
expired, without an attempt, since the instance that claimed them is gone (its session ended).

The small keepalive and TCP user timeout settings in the stalled runner's DSN are libpq's own (they win over
the runner's defaults) and must be accepted; a stall behind a proxy in user space cannot set them off (the
proxy's kernel acknowledges every keepalive probe and every byte), so here it is the runner's deadline on its
own statements, or the server ending the abandoned session, that notices. Nothing else would ever time out.
Both runners get a statement deadline of 10 s (the server's idle_session_timeout of their sessions too) instead
of the default 30 s, so that a stall of 25 s leaves the same margin over it as 45 s over the default."""
from __future__ import annotations

import time

from drain import (  # noqa: F401 (the fixtures)
    DB, assert_every_job_completed_once, enqueue_drain, hold, log_lines, progress, runner_flags,
    runner_login, tcp_cluster, wait)
from proxy import Proxy
from test_outages_are_logged_when_they_start_and_end import OUTAGE_START

STALL_SECONDS = 25
LEASE_SECONDS = 15
# the runners' deadline on their own statements (and their sessions' idle_session_timeout): well inside the stall
DEADLINE_SECONDS = 10
# libpq's own settings in the DSN (they win over the runner's defaults)
DETECTION = {"keepalives_idle": "2", "keepalives_interval": "1", "keepalives_count": "2", "tcp_user_timeout": "5000"}
# How the runner tells that it lost a connection to the stall (a warning whose message starts with one of
# these): the outage's start, or its deadline on a statement that got no answer
LOST_CONNECTION = (OUTAGE_START, "no answer from the database")
JOBS = 800


def lost_connection(runner) -> bool:
    return any(e["level"] == "warning" and e["msg"].startswith(LOST_CONNECTION) for e in log_lines(runner))


def test_a_stalled_network_is_noticed(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    proxy = Proxy(tcp_cluster.port)
    try:
        enqueue_drain(tcp_cluster, JOBS)
        # a lease shorter than the stall: the standby recovers the stalled runner's claims (max_attempts = 1:
        # a counted attempt would fail a job)
        flags = runner_flags(LEASE_SECONDS, "--statement-deadline-sec", str(DEADLINE_SECONDS))
        stalled = start(extra=("--dsn", tcp_cluster.tcp_dsn(DB, runner_login, port=proxy.port, **DETECTION), *flags),
                        user=runner_login, name="stalled")
        wait(lambda: stalled.role(DB) == "active", 60, "the runner behind the proxy to be active", stalled)
        standby = start(extra=("--dsn", tcp_cluster.tcp_dsn(DB, runner_login), *flags), user=runner_login,
                        name="standby")
        wait(lambda: standby.role(DB) == "standby", 60, "the second runner to stand by", standby)
        progress(tcp_cluster, 30, 120, "the stall", stalled)

        proxy.stall()
        end = time.monotonic() + STALL_SECONDS
        wait(lambda: lost_connection(stalled), end - time.monotonic(),
             f"the stalled runner to log that its connection was lost {LOST_CONNECTION}", stalled, standby)
        wait(lambda: standby.role(DB) == "active", end - time.monotonic(), "the standby to take over", stalled,
             standby)
        hold(end - time.monotonic(), stalled, standby)
        proxy.resume()

        assert_every_job_completed_once(tcp_cluster, JOBS, 180, stalled, standby)
        assert stalled.proc.poll() is None and standby.proc.poll() is None
    finally:
        proxy.close()
