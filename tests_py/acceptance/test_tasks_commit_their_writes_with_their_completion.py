"""Tasks run by a real worker process (`pgsql-broker worker`) commit their database writes with their completion:
exactly once for what a handler writes in ctx.conn, whatever happens to the handler (it raises, is cancelled, the
worker is killed or stopped)."""
from __future__ import annotations

import os
import signal

import pytest

from conftest import connect
from job_checks import wait_until
from worker_process import WORKER_HEADER as WORKER_HEADER_PLAIN, WorkerProcess, worker_login

WRITE_APP = """
@worker.task("write")
async def write(args, ctx):
    await ctx.conn.execute("INSERT INTO effects (job_id, attempt) VALUES (%s, %s)", [ctx.job_id, ctx.attempt])
    if args.get("boom") and ctx.attempt == 1:
        raise RuntimeError("boom after writing")
    return {"n": args["n"]}

RUNNING = {"now": 0, "most": 0}

@worker.task("one_at_a_time", concurrency=1)
async def one_at_a_time(args, ctx):
    RUNNING["now"] += 1
    RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
    await asyncio.sleep(0.05)
    RUNNING["now"] -= 1
    return {"most_at_once": RUNNING["most"]}

@worker.task("slow_one_at_a_time", concurrency=1)
async def slow_one_at_a_time(args, ctx):
    await asyncio.sleep(3.5)

@worker.task("steady")
async def steady(args, ctx):
    await asyncio.sleep(0.05)

@worker.task("hang")
async def hang(args, ctx):
    await ctx.conn.execute("INSERT INTO effects (job_id, attempt) VALUES (%s, %s)", [ctx.job_id, ctx.attempt])
    if ctx.attempt == 1 or args.get("always"):
        (FLAGS / f"started-{ctx.job_id}").touch()
        await asyncio.sleep(3600)
"""


@pytest.fixture
def effects_db(db):
    with connect(db) as conn:
        conn.execute("CREATE TABLE effects (job_id bigint NOT NULL, attempt integer NOT NULL)")
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '0', false)")
    return db


def states(conn, name: str) -> dict[int, int]:
    rows = conn.execute("SELECT complete_status, count(*) FROM broker.broker_jobs WHERE job_name = %s GROUP BY 1",
                        (name,)).fetchall()
    return dict(rows)


def test_500_tasks_leave_500_rows_and_a_handler_that_raises_leaves_none(effects_db, tmp_path):
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        conn.execute("SELECT broker.broker_add_task('write', jsonb_build_object('n', i, 'boom', i % 50 = 0), "
                     "p_max_attempts => 2) FROM generate_series(1, 500) AS i")
        worker = WorkerProcess(tmp_path, db, login, WRITE_APP)
        try:
            wait_until(lambda: states(conn, "write") == {2: 500}, timeout=120, what="500 tasks completed")
        finally:
            worker.kill()
        assert conn.execute("SELECT count(*), count(DISTINCT job_id) FROM effects").fetchone() == (500, 500)
        # the ten that raised after writing: their first attempt's row is gone, the second's is there
        boomed = conn.execute("""SELECT j.job_id, j.attempts, e.attempt FROM broker.broker_jobs AS j
                                   JOIN effects AS e USING (job_id) WHERE (j.execute_str::jsonb->>'boom')::boolean""").fetchall()
        assert len(boomed) == 10 and all(attempts == 2 and attempt == 2 for _, attempts, attempt in boomed)
        outcomes = conn.execute("SELECT outcome, error_message FROM broker.broker_job_attempts "
                                "WHERE outcome <> 'completed'").fetchall()
        assert outcomes == [("failed", "RuntimeError: boom after writing")] * 10
        assert conn.execute("SELECT count(*) FROM broker.broker_job_attempts WHERE outcome = 'completed' "
                            "AND output::jsonb ? 'n'").fetchone()[0] == 500


def test_a_worker_killed_mid_task_leaves_no_row_and_the_task_runs_again(effects_db, tmp_path):
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        job = conn.execute("SELECT job_id FROM broker.broker_add_task('hang', '{}', p_max_attempts => 2)").fetchone()[0]
        first = WorkerProcess(tmp_path, db, login, WRITE_APP, name="first")
        try:
            first.wait_flag(f"started-{job}")
        finally:
            first.kill()   # SIGKILL, mid-task: its transaction dies with its connection
        wait_until(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                                        (login,)).fetchone()[0] == 0, timeout=30, what="the killed worker's sessions gone")
        assert conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 0
        # its lease runs out (handed over, not waited for) and the runner's recovery returns it
        conn.execute("UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second' WHERE job_id = %s", (job,))
        assert conn.execute("SELECT complete_status FROM broker.broker_recover_stale_jobs()").fetchall() == [(0,)]
        second = WorkerProcess(tmp_path, db, login, WRITE_APP, name="second")
        try:
            wait_until(lambda: states(conn, "hang") == {2: 1}, timeout=60, what="the task completed on its second attempt")
        finally:
            second.kill()
        assert conn.execute("SELECT job_id, attempt FROM effects").fetchall() == [(job, 2)]
        assert conn.execute("SELECT outcome FROM broker.broker_job_attempts WHERE job_id = %s ORDER BY attempt",
                            (job,)).fetchall() == [("lost",), ("completed",)]


def test_a_cancel_request_stops_a_running_task_and_rolls_its_writes_back(effects_db, tmp_path):
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        job = conn.execute("SELECT job_id FROM broker.broker_add_task('hang', '{\"always\": true}', p_max_attempts => 3)"
                           ).fetchone()[0]
        worker = WorkerProcess(tmp_path, db, login, WRITE_APP)
        try:
            worker.wait_flag(f"started-{job}")
            assert conn.execute("SELECT broker.broker_cancel_job(%s, 'not needed')", (job,)).fetchone()[0] == 1
            wait_until(lambda: states(conn, "hang") == {4: 1}, timeout=60, what="the task cancelled")
        finally:
            worker.kill()
        assert conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 0
        assert conn.execute("SELECT cancel_reason, attempts FROM broker.broker_jobs WHERE job_id = %s", (job,)
                            ).fetchone() == ("not needed", 1)
        assert conn.execute("SELECT outcome FROM broker.broker_job_attempts WHERE job_id = %s", (job,)
                            ).fetchall() == [("cancelled",)]


def test_stopping_the_worker_hands_a_running_task_back_without_failing_it(effects_db, tmp_path):
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        job = conn.execute("SELECT job_id FROM broker.broker_add_task('hang', '{\"always\": true}')").fetchone()[0]
        worker = WorkerProcess(tmp_path, db, login, WRITE_APP)
        try:
            worker.wait_flag(f"started-{job}")
            worker.signal(signal.SIGTERM)
            assert worker.wait_exit(60) == 0
        finally:
            worker.kill()
        assert conn.execute("SELECT complete_status, attempts, interruptions FROM broker.broker_jobs WHERE job_id = %s",
                            (job,)).fetchone() == (0, 0, 1)
        assert conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 0
        assert "task handed back at the worker's stop deadline" in worker.log_path.read_text()


def test_jobs_show_prints_a_task_with_its_arguments_and_output(db):
    import subprocess
    import sys
    from runner_process import db_dsn
    with connect(db) as conn:
        job = conn.execute("""SELECT job_id FROM broker.broker_add_task('send_email', '{"to": "ada@example.com"}')""").fetchone()[0]
        token = conn.execute("SELECT lease_token FROM broker.broker_claim_tasks(ARRAY['send_email'])").fetchone()[0]
        assert conn.execute("SELECT broker.broker_complete_task(%s, %s, '{\"sent\": true}')", (job, token)).fetchone()[0]
    shown = subprocess.run([sys.executable, "-m", "pgsql_broker", "jobs", "show", str(job), "--dsn", db_dsn(db)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert out.startswith(f"task {job} 'send_email': completed")
    assert "  args:\n    {\n      \"to\": \"ada@example.com\"\n    }" in out
    assert "output '{\"sent\": true}'" in out
    assert "queue:" not in out


def test_a_name_with_a_cap_of_its_own_runs_that_many_at_once(effects_db, tmp_path):
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        conn.execute("SELECT broker.broker_add_task('one_at_a_time') FROM generate_series(1, 6)")
        worker = WorkerProcess(tmp_path, db, login, WRITE_APP)
        try:
            wait_until(lambda: states(conn, "one_at_a_time") == {2: 6}, timeout=60, what="6 tasks completed")
        finally:
            worker.kill()
        most = conn.execute("SELECT max((output::jsonb->>'most_at_once')::int) FROM broker.broker_job_attempts").fetchone()[0]
        assert most == 1


def test_tasks_waiting_for_a_slot_longer_than_their_lease_keep_it(effects_db, tmp_path):
    """Claimed ahead (twice its cap), the second task of a name capped at one waits 3.5 s behind the first with a
    3 s lease: the worker renews the waiting one's lease, so recovery (run by hand all along) takes nothing back."""
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        conn.execute("SELECT broker.broker_add_task('slow_one_at_a_time') FROM generate_series(1, 2)")
        worker = WorkerProcess(tmp_path, db, login, WRITE_APP)
        recovered = 0
        try:
            def all_done() -> bool:
                nonlocal recovered
                recovered += conn.execute("SELECT count(*) FROM broker.broker_recover_stale_jobs()").fetchone()[0]
                return states(conn, "slow_one_at_a_time") == {2: 2}
            wait_until(all_done, timeout=60, what="2 tasks completed")
        finally:
            worker.kill()
        assert recovered == 0
        attempts = conn.execute("SELECT count(*) FROM broker.broker_job_attempts").fetchone()[0]
        assert attempts == 2


def test_a_worker_whose_connections_are_cut_fails_no_task(effects_db, tmp_path):
    """Every connection of the worker terminated mid-drain (a failover, a proxy restart): it reconnects; the
    tasks whose completion was cut are handed back or recovered after their lease, none fails."""
    db = effects_db
    with worker_login(db, ("effects",)) as login, connect(db) as conn:
        conn.execute("SELECT broker.broker_add_task('steady', '{}', p_max_attempts => 3) FROM generate_series(1, 60)")
        worker = WorkerProcess(tmp_path, db, login, WRITE_APP)
        try:
            wait_until(lambda: states(conn, "steady").get(2, 0) >= 10, timeout=60, what="10 tasks completed")
            cut = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = %s",
                               (login,)).fetchone()[0]
            assert cut >= 2

            def all_done() -> bool:
                conn.execute("SELECT broker.broker_recover_stale_jobs()")   # (the runner's maintenance, here by hand)
                return states(conn, "steady") == {2: 60}
            wait_until(all_done, timeout=90, what="every task completed after the cut")
        finally:
            worker.kill()
        assert conn.execute("SELECT count(*) FROM broker.broker_job_attempts WHERE outcome = 'failed'").fetchone()[0] == 0


def test_a_worker_whose_login_may_not_claim_tasks_says_so_in_one_line(db, tmp_path):
    import subprocess
    import sys
    import uuid
    login = f"stranger_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" LOGIN')
    try:
        (tmp_path / "app.py").write_text(WORKER_HEADER_PLAIN + WRITE_APP)
        dsn = f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={login}"
        result = subprocess.run([sys.executable, "-c", "from pgsql_broker.cli import main; main()", "worker", "--app",
                                 "app:worker", "--dsn", dsn], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                                env={**os.environ, "TASK_FLAGS": str(tmp_path)})
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP ROLE "{login}"')
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "Error: permission denied for schema broker (SQLSTATE 42501)"
    assert "Traceback" not in result.stderr
