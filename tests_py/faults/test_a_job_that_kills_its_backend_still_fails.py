"""A job that kills its own backend still uses up its attempts: `SELECT pg_terminate_backend(pg_backend_pid())`
with max_attempts 2 ends failed after 2 attempts. The jobs claimed with it in the same worker's buffer (one
worker, one claim) did not start when the connection died: they are handed back without an attempt and all
complete, exactly once."""
from __future__ import annotations

from drain import DB, effects, enqueue_drain, runner_flags, runner_login, statuses, tcp_cluster, wait  # noqa: F401
from conftest import add_job

BEFORE, AFTER = 10, 30


def test_a_job_that_kills_its_backend_still_fails(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    enqueue_drain(tcp_cluster, BEFORE)
    with tcp_cluster.connect(DB) as conn:  # (a timeout: it runs in a transaction of its own, after the others')
        # its second attempt at once when the first one's lease is recovered (no backoff: the default waits 5 s)
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0')")
        killer = add_job(conn, "killer", "SELECT pg_terminate_backend(pg_backend_pid())", max_attempts=2,
                         timeout="5 minutes")
    enqueue_drain(tcp_cluster, AFTER, first=BEFORE)
    # one worker: all 41 jobs are one claim (the buffer holds 50), so 30 wait in it when the killer runs; a lease
    # of 5 s: each of the killer's attempts is recovered when it runs out, and the claims waiting with it go back
    # on the worker's new connection long before it does (a fraction of a second after the claim)
    runner = start(extra=("--dsn", tcp_cluster.tcp_dsn(DB, runner_login), "--workers-per-queue", "1",
                          *runner_flags(5)), user=runner_login, name="killer")
    wait(lambda: statuses(tcp_cluster)["pending"] + statuses(tcp_cluster)["running"] == 0, 120,
         "every job to finish", runner)
    with tcp_cluster.connect(DB) as conn:
        jobs = {job_id: (status, attempts) for job_id, status, attempts in conn.execute(
            "SELECT job_id, complete_status, attempts FROM broker.broker_jobs")}
        errors = conn.execute("SELECT job_name, complete_status, attempts, last_error_message FROM broker.broker_jobs "
                              "WHERE complete_status <> 2 AND job_id <> %s LIMIT 5", (killer,)).fetchall()
    assert jobs.pop(killer) == (3, 2)
    assert not errors, f"jobs claimed with the killer paid for it: {dict(statuses(tcp_cluster))}; {errors}"
    assert set(jobs.values()) == {(2, 1)}
    assert effects(tcp_cluster) == BEFORE + AFTER
    assert runner.proc.poll() is None
