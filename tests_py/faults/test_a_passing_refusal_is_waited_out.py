"""A passing refusal is waited out: the database refuses the runner for 10 s during a drain, once because
its login lost broker_runtime (REVOKE, then GRANT), once because pg_hba.conf rejects the login (and its
session was ended, so it must log in again). The runner has served the database before, so it does not
exit: it retries for as long as the refusal lasts, logs a warning at each refused try that says what to do,
resumes once the refusal is lifted, and every job completes exactly once."""
from __future__ import annotations

from drain import (  # noqa: F401 (the fixtures)
    DB, assert_every_job_completed_once, enqueue_drain, hold, progress, runner_login, tcp_cluster, warnings_saying)

# What each refusal's warnings name, so that an operator knows what to do:
NO_RUNTIME_ADVICE = "broker_runtime"   # the login must be a member of broker_runtime again
HBA_ADVICE = "pg_hba.conf"             # pg_hba.conf rejects the login
REFUSAL_SECONDS = 10
# the runner's reconnect backoff at most (broker.notify_retry_seconds): several refused tries in REFUSAL_SECONDS
RETRY_CAP_SECONDS = 2
JOBS = 600


def start_draining(cluster, login: str, start, name: str):
    """A runner (backoff at most RETRY_CAP_SECONDS, so that it tries several times during the refusal) draining
    JOBS jobs, once it has run some."""
    enqueue_drain(cluster, JOBS)
    runner = start(extra=("--dsn", cluster.tcp_dsn(DB, login), "--notify-retry-seconds", str(RETRY_CAP_SECONDS)),
                   user=login, name=name)
    progress(cluster, 30, 120, "the refusal", runner)
    return runner


def assert_waited_out(cluster, runner, advice: str) -> None:
    assert_every_job_completed_once(cluster, JOBS, 180, runner)
    assert runner.proc.poll() is None
    refusals = warnings_saying(runner, advice)
    assert len(refusals) >= 2, f"expected a warning naming {advice!r} at each refused try, got {refusals}"


def test_a_revoked_broker_runtime_is_waited_out(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    runner = start_draining(tcp_cluster, runner_login, start, "revoked")
    with tcp_cluster.connect() as admin:
        admin.execute(f'REVOKE broker_runtime FROM "{runner_login}"')
        hold(REFUSAL_SECONDS, runner)
        admin.execute(f'GRANT broker_runtime TO "{runner_login}"')
    assert_waited_out(tcp_cluster, runner, NO_RUNTIME_ADVICE)


def test_a_pg_hba_reject_is_waited_out(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    runner = start_draining(tcp_cluster, runner_login, start, "rejected")
    tcp_cluster.hba_reject(runner_login)
    try:
        with tcp_cluster.connect() as admin:
            # only the session (LISTEN, the instance lock): its workers' running jobs are left alone, as a
            # terminated job would rightly use up its attempt
            ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s "
                                  "AND application_name LIKE '%%:listen'", (runner_login,)).fetchall()
        assert ended == [(True,)], "the runner's session (application_name ...:listen) was not found"
        hold(REFUSAL_SECONDS, runner)
    finally:
        tcp_cluster.hba_restore()
    assert_waited_out(tcp_cluster, runner, HBA_ADVICE)
