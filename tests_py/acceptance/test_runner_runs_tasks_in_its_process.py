"""A task worker in the runner's process (tasks_app): one real `pgbroker-runner` process runs a mixed pipeline, SQL
job then task then SQL job, with the worker logged in as a broker_worker member of its own; the worker's metrics are
on the runner's /metrics; SIGTERM stops both. A worker that cannot start or is refused stops the runner with one line
and exit code 1."""
from __future__ import annotations

import signal
import textwrap

from conftest import connect
from runner_process import Runner, db_dsn
from worker_process import worker_login

APP = """
from pgsql_broker.tasks import Worker

worker = Worker(concurrency=2, lease_seconds=5, poll_seconds=0.5, shutdown_seconds=1)

@worker.task("call_api")
async def call_api(args, ctx):
    await ctx.conn.execute("INSERT INTO called (job_id, n) VALUES (%s, %s)", [ctx.job_id, args["n"]])
    return {"doubled": args["n"] * 2}
"""


def _app_dir(tmp_path):
    (tmp_path / "inproc_app.py").write_text(textwrap.dedent(APP))
    return {"PYTHONPATH": str(tmp_path)}


def test_the_runner_runs_sql_jobs_and_tasks_of_one_pipeline(db, tmp_path):
    with connect(db) as conn:
        conn.execute("CREATE TABLE called (job_id bigint, n integer)")
        conn.execute("CREATE TABLE loaded (n integer)")
    with worker_login(db, ("called",)) as login, connect(db) as conn:
        extract = conn.execute("SELECT job_id FROM broker.broker_add_job('extract', 'SELECT 1')").fetchone()[0]
        task = conn.execute("SELECT job_id FROM broker.broker_add_task('call_api', '{\"n\": 21}', "
                            "p_depends_on_job_ids => ARRAY[%s::bigint])", (extract,)).fetchone()[0]
        load = conn.execute("SELECT job_id FROM broker.broker_add_job('load', "
                            "'INSERT INTO loaded SELECT n FROM called', p_depends_on_job_ids => ARRAY[%s::bigint])",
                            (task,)).fetchone()[0]
        runner = Runner(db, log_dir=tmp_path, env=_app_dir(tmp_path),
                        extra=("--tasks-app", "inproc_app:worker", "--tasks-dsn", db_dsn(db, login)))
        try:
            runner.wait_for(lambda _: conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2 "
                                                   "AND job_id = ANY(%s)", ([extract, task, load],)).fetchone()[0] == 3,
                            timeout=60, what="the pipeline's three steps completed")
            assert conn.execute("SELECT n FROM loaded").fetchall() == [(21,)], "the load read what the task wrote"
            attempt = conn.execute("SELECT output::jsonb FROM broker.broker_job_attempts WHERE job_id = %s", (task,)).fetchone()
            assert attempt[0] == {"doubled": 42}
            status, body = runner.get("/metrics")
            assert status == 200
            assert 'pgsql_broker_worker_tasks_total{outcome="completed",task="call_api"} 1.0' in body.decode()
            runner.signal(signal.SIGTERM)
            assert runner.wait(30) == 0, runner.log()
            assert "task worker in the runner's process" in runner.log()
        finally:
            runner.kill()


def test_a_worker_that_cannot_run_stops_the_runner_with_one_line(db, tmp_path):
    env = _app_dir(tmp_path)
    missing = Runner(db, log_dir=tmp_path, env=env, name="missing", extra=("--tasks-app", "no_such_module:worker"))
    try:
        assert missing.wait(30) == 1
        assert "error: tasks_app: cannot import no_such_module" in missing.log()
    finally:
        missing.kill()
    bad_spec = Runner(db, log_dir=tmp_path, env=env, name="spec", extra=("--tasks-app", "inproc_app"))
    try:
        assert bad_spec.wait(30) == 2   # a usage error, as for any bad setting
        assert "tasks_app must be module:attribute" in bad_spec.log()
    finally:
        bad_spec.kill()
    # a login that may not claim tasks (the broker_worker role's): refused for good, the runner stops too
    with connect("postgres") as admin:
        admin.execute("CREATE ROLE inproc_not_a_worker LOGIN IN ROLE broker_enqueue")
    try:
        refused = Runner(db, log_dir=tmp_path, env=env, name="refused",
                         extra=("--tasks-app", "inproc_app:worker", "--tasks-dsn", db_dsn(db, "inproc_not_a_worker")))
        try:
            assert refused.wait(60) == 1, refused.log()
            errors = [line for line in refused.log().splitlines() if line.startswith("error: tasks_app:")]
            assert len(errors) == 1 and "SQLSTATE 42501" in errors[0], refused.log()
        finally:
            refused.kill()
    finally:
        with connect("postgres") as admin:
            admin.execute("DROP ROLE inproc_not_a_worker")
