"""A task's content cannot stop the worker that claims it. The worker decodes a claimed task's arguments (JSON) and
timeout (an interval) in Python; an enqueuer chooses both. PostgreSQL takes JSON nested thousands deep, integers of
thousands of digits and timeouts of millions of years, which Python's json and timedelta refuse (RecursionError,
ValueError, OverflowError). Such a task used to raise out of the claim: the worker process exited, and a worker in
the runner's process (tasks_app) stopped the runner, so one tenant's enqueuer stopped every tenant's SQL jobs (and
the tasks of that claim stayed running until their lease ran out, to be claimed and crash the worker again). Now the
worker fails such a task for good, with the reason, and goes on.

Strict tenancy: an enqueuer of tenant acme (the in-process worker's tenant) against tenant other's SQL job."""
from __future__ import annotations

import signal
import textwrap

from conftest import connect
from runner_process import Runner, db_dsn
from tenant_logins import tenant_logins
from worker_process import WorkerProcess

APP = """
from pgsql_broker.tasks import Worker

worker = Worker(tenant="acme", concurrency=2, lease_seconds=5, poll_seconds=0.5, shutdown_seconds=1)

@worker.task("render")
async def render(args, ctx):
    return {"rendered": args}
"""

POISON = {
    "nested": ("'" + "[" * 5000 + "]" * 5000 + "'", None),
    "long_number": ("'{\"n\": 1" + "0" * 5000 + "}'", None),
    "endless_timeout": ("'{}'", "100000000 years"),
}


def _enqueue_tasks(db: str, user: str) -> tuple[dict[str, int], int]:
    """The poison tasks (max_attempts 3: not failed by running out of attempts) and a good one, in one
    transaction, so that one claim takes them all."""
    ids = {}
    with connect(db, user=user, autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant('acme')")
        for label, (args, timeout) in POISON.items():
            ids[label] = conn.execute(f"SELECT job_id FROM broker.broker_add_task('render', {args}::jsonb, "
                                      "p_max_attempts => 3, p_timeout => %s::interval)", (timeout,)).fetchone()[0]
        good = conn.execute("SELECT job_id FROM broker.broker_add_task('render', '{\"page\": 1}')").fetchone()[0]
        conn.commit()
    return ids, good


def _ends(db: str, ids: list[int]) -> dict[int, tuple[int, str | None]]:
    """Each job's status and the error of its last attempt."""
    with connect(db) as conn:
        rows = conn.execute("""SELECT j.job_id, j.complete_status,
                                      (SELECT a.error_message FROM broker.broker_job_attempts AS a
                                        WHERE a.job_id = j.job_id ORDER BY a.attempt_id DESC LIMIT 1)
                                 FROM broker.broker_jobs AS j WHERE j.job_id = ANY(%s)""", (ids,)).fetchall()
    return {job_id: (status, error) for job_id, status, error in rows}


def _assert_poison_failed(ends: dict, poison: dict[str, int]) -> None:
    for label, job_id in poison.items():
        status, error = ends[job_id]
        assert status == 3, f"{label}: status {status}"
        assert error and "cannot be read" in error, f"{label}: {error!r}"


def test_a_tasks_content_does_not_stop_the_runner_of_every_tenant(db, tmp_path):
    (tmp_path / "poison_app.py").write_text(textwrap.dedent(APP))
    with tenant_logins(db, {"acme_enq": "acme", "other_enq": "other"}, workers={"acme_worker": "acme"}) as logins:
        poison, good = _enqueue_tasks(db, logins["acme_enq"])
        runner = Runner(db, log_dir=tmp_path, user=logins["runner"], env={"PYTHONPATH": str(tmp_path)},
                        extra=("--tasks-app", "poison_app:worker", "--tasks-dsn", db_dsn(db, logins["acme_worker"])))
        try:
            ids = [*poison.values(), good]
            runner.wait_for(lambda _: all(status >= 2 for status, _ in _ends(db, ids).values()), timeout=60,
                            what="the tasks ended")
            ends = _ends(db, ids)
            assert ends[good][0] == 2, "the good task of the same claim completed"
            _assert_poison_failed(ends, poison)
            # the runner still serves the other tenant
            with connect(db, user=logins["other_enq"], autocommit=False) as conn:
                conn.execute("SELECT broker.broker_set_tenant('other')")
                job = conn.execute("SELECT job_id FROM broker.broker_add_job('other report', 'SELECT 1')").fetchone()[0]
                conn.commit()
            with connect(db) as conn:
                runner.wait_for(lambda _: conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                                                       (job,)).fetchone()[0] == 2,
                                timeout=60, what="the other tenant's job completed")
            runner.signal(signal.SIGTERM)
            assert runner.wait(30) == 0, runner.log()
        finally:
            runner.kill()


def test_a_tasks_content_does_not_stop_a_worker_process(db, tmp_path):
    with tenant_logins(db, {"acme_enq": "acme"}, workers={"acme_worker": "acme"}, runtime=()) as logins:
        poison, good = _enqueue_tasks(db, logins["acme_enq"])
        worker = WorkerProcess(tmp_path, db, logins["acme_worker"], textwrap.dedent("""
            worker.tenant = "acme"

            @worker.task("render")
            async def render(args, ctx):
                (FLAGS / f"done-{ctx.job_id}").touch()
                return {"rendered": args}
        """))
        try:
            worker.wait_flag(f"done-{good}")
            ids = [*poison.values(), good]
            with connect(db) as conn:
                for label, job_id in poison.items():
                    status = conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                                          (job_id,)).fetchone()[0]
                    assert status == 3, f"{label} ended before the good task of the same claim started: {status}"
            _assert_poison_failed(_ends(db, ids), poison)
            assert worker.proc.poll() is None, worker.log_path.read_text()
            worker.signal(signal.SIGTERM)
            assert worker.wait_exit(30) == 0, worker.log_path.read_text()
        finally:
            worker.kill()
