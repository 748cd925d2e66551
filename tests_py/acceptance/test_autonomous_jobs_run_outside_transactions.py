"""Autonomous jobs with a real runner: a scheduled VACUUM ANALYZE, CREATE INDEX CONCURRENTLY, REINDEX INDEX
CONCURRENTLY and REFRESH MATERIALIZED VIEW CONCURRENTLY (via set_role: the runner's login SET ROLEs to the
maintenance role, whose objects they are) and a CALL of a procedure that commits every 1,000 rows over 100,000
rows (via login: the runner logs in as the role) all complete, each as its run_as role; a runner killed with
SIGKILL in the middle of the procedure leaves the job running under its lease, and the next runner retries it to
completion (at least once)."""
from __future__ import annotations

import signal
import time

import pytest

from autonomous_setup import add_job, autonomous_roles, outcome
from conftest import connect

# the instant the schedule is ticked at (broker._schedule_tick_at): no outcome depends on the date the tests run
TICK_AT = "2027-06-15 03:00:30+00"
# 100 chunks of 1,000 rows, each committed; a short sleep per chunk gives the SIGKILL test a middle to hit
PROCEDURE = """CREATE PROCEDURE process_items(p_chunk integer, p_pause float8) LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    LOOP
        UPDATE items SET done = true, by_role = current_user
         WHERE id IN (SELECT id FROM items WHERE NOT done ORDER BY id LIMIT p_chunk);
        GET DIAGNOSTICS n = ROW_COUNT;
        EXIT WHEN n = 0;
        INSERT INTO chunks (rows_done, by_role) VALUES (n, session_user);
        PERFORM pg_sleep(p_pause);
        COMMIT;
    END LOOP;
END $$"""


def wait_until(predicate, timeout: float, what: str, runner=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f":\n{runner.log()[-3000:]}" if runner else ""))


def maintenance_objects(a) -> None:
    with a.as_role(a.maint) as conn:
        conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, name text NOT NULL) WITH (autovacuum_enabled = false)")
        conn.execute("INSERT INTO orders SELECT i, 'order ' || i FROM generate_series(1, 20000) AS i")
        conn.execute("DELETE FROM orders WHERE id % 2 = 0")
        conn.execute("CREATE INDEX orders_name_idx ON orders (name)")
        conn.execute("CREATE MATERIALIZED VIEW order_names AS SELECT id, name FROM orders")
        conn.execute("CREATE UNIQUE INDEX order_names_id ON order_names (id)")
        conn.execute("UPDATE orders SET name = 'renamed' WHERE id = 1")


def procedure_objects(a, rows: int = 100_000) -> None:
    with a.as_role(a.etl) as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY, done boolean NOT NULL DEFAULT false, by_role name)")
        conn.execute("INSERT INTO items (id) SELECT generate_series(1, %s)", (rows,))
        conn.execute("CREATE TABLE chunks (rows_done integer, by_role name)")
        conn.execute(PROCEDURE)


def test_maintenance_and_a_committing_procedure_complete_each_as_its_role(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a:
        maintenance_objects(a)
        procedure_objects(a)
        with connect(db) as conn:
            old_node = conn.execute("SELECT relfilenode FROM pg_class WHERE relname = 'orders_name_idx'").fetchone()[0]
        with a.as_role(a.maint) as conn:
            conn.execute("SELECT broker.broker_add_schedule('nightly vacuum', '0 3 * * *', 'VACUUM ANALYZE orders', "
                         "p_autonomous => true)")
            # the schedule is due at the fixed instant (its next fire 30 s before it)
            conn.execute("UPDATE broker.broker_schedule SET next_fire_at = %s::timestamptz - interval '30 seconds'",
                         (TICK_AT,))
        with connect(db) as owner:  # (the tick is the runtime's: run here by the test's superuser)
            assert owner.execute("SELECT jobs_enqueued FROM broker._schedule_tick_at(%s)", (TICK_AT,)).fetchone()[0] == 1
        with a.as_role(a.maint) as conn:
            jobs = {"vacuum": conn.execute("SELECT job_id FROM broker.broker_jobs WHERE schedule_id IS NOT NULL").fetchone()[0],
                    "cic": add_job(conn, "cic", "CREATE INDEX CONCURRENTLY orders_lower_name ON orders (lower(name))"),
                    "reindex": add_job(conn, "reindex", "REINDEX INDEX CONCURRENTLY orders_name_idx"),
                    "refresh": add_job(conn, "refresh", "REFRESH MATERIALIZED VIEW CONCURRENTLY order_names")}
        with a.as_role(a.etl) as conn:
            jobs["call"] = add_job(conn, "call", "CALL process_items(1000, 0.01)", max_attempts=3)
        # one worker: CONCURRENTLY commands on one table at the same time can deadlock each other
        # (docs/jobs.md: run one table's maintenance one at a time)
        runner = start(extra=("--config", str(a.config), "--workers-per-queue", "1"), user=a.runner)
        seen: set = set()

        def call_seen() -> bool:
            with connect(db) as conn:
                seen.update(conn.execute("SELECT usename, query FROM pg_stat_activity "
                                         "WHERE application_name LIKE '%:autonomous' AND query LIKE 'CALL%'").fetchall())
                return all(outcome(db, j)[0] == 2 for j in jobs.values())
        wait_until(call_seen, 120, "the five autonomous jobs", runner)

        assert all(outcome(db, j)[:2] == (2, 1) for j in jobs.values()), {k: outcome(db, j) for k, j in jobs.items()}
        with connect(db) as conn:
            # set_role: each statement needed the objects' owner (the runner's login owns nothing and is not
            # allowed to use maint's privileges: broker_runtime is NOINHERIT)
            wait_until(lambda: conn.execute("SELECT pg_stat_clear_snapshot(); SELECT 1").fetchone() and conn.execute(
                "SELECT vacuum_count > 0 AND analyze_count > 0 FROM pg_stat_user_tables WHERE relname = 'orders'"
            ).fetchone()[0], 30, "the vacuum's statistics")
            assert conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'orders_lower_name'::regclass").fetchone() == (True,)
            assert conn.execute("SELECT relfilenode FROM pg_class WHERE relname = 'orders_name_idx'").fetchone()[0] != old_node
            assert conn.execute("SELECT name FROM order_names WHERE id = 1").fetchone() == ("renamed",)
            assert conn.execute("SELECT has_table_privilege(%s, 'orders', 'SELECT')", (a.runner,)).fetchone() == (False,)
            # login: the procedure ran logged in as etl, 100 chunks of 1,000 rows, each committed
            assert conn.execute("SELECT count(*), sum(rows_done), array_agg(DISTINCT by_role) FROM chunks").fetchone() == (
                100, 100_000, [a.etl])
            assert conn.execute("SELECT count(*) FROM items WHERE NOT done OR by_role <> %s", (a.etl,)).fetchone() == (0,)
        assert seen == {(a.etl, "CALL process_items(1000, 0.01)")}
        assert "job completed" in runner.log()


def test_a_runner_killed_in_the_middle_of_the_procedure_leaves_a_job_that_is_retried_and_completes(db, tmp_path, start):
    # a lease short enough that the next runner's recovery comes soon, renewed every 5/3 s while the first runs
    with autonomous_roles(db, tmp_path, lease_seconds=5) as a:
        procedure_objects(a)
        with a.as_role(a.etl) as conn:
            job = add_job(conn, "call", "CALL process_items(1000, 0.05)", max_attempts=3)
        first = start(extra=("--config", str(a.config)), user=a.runner, name="first")
        with connect(db) as conn:
            wait_until(lambda: conn.execute("SELECT count(*) FROM chunks").fetchone()[0] >= 10, 60,
                       "the procedure to be under way", first)
            first.signal(signal.SIGKILL)
            first.wait(10)
            status, attempts, *_ = outcome(db, job)
            done = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            assert (status, attempts) == (1, 1) and done < 100  # claimed, running under a lease no one renews
            # the killed runner's backend notices its client is gone and stops (client_connection_check_interval)
            wait_until(lambda: not conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s "
                                                "AND query LIKE 'CALL%%' AND state = 'active'", (a.etl,)).fetchone()[0],
                       30, "the orphaned CALL to end")
        second = start(extra=("--config", str(a.config)), user=a.runner, name="second")
        wait_until(lambda: outcome(db, job)[0] == 2, 90, "the retried job to complete", second)
        status, attempts, sqlstate, message = outcome(db, job)
        assert (status, attempts) == (2, 2)
        with connect(db) as conn:
            # at least once: the chunks the first attempt committed stay done, the retry did the rest
            assert conn.execute("SELECT sum(rows_done) FROM chunks").fetchone() == (100_000,)
            assert conn.execute("SELECT count(*) FROM items WHERE NOT done").fetchone() == (0,)
        assert "recovered a job whose lease expired" in second.log()


def test_timeouts_retries_and_dependencies_work_as_for_other_jobs(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a:
        with a.as_role(a.etl) as conn:
            conn.execute("CREATE TABLE marks (job text)")
            conn.execute("CREATE PROCEDURE mark(p text) LANGUAGE plpgsql AS $$BEGIN INSERT INTO marks VALUES (p); COMMIT; END $$")
            conn.execute("CREATE PROCEDURE slow() LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(30); COMMIT; END $$")
            slow = add_job(conn, "slow", "CALL slow()", timeout="1 second", max_attempts=2)
            first = add_job(conn, "first", "CALL mark('first')")
            after_first = conn.execute("SELECT job_id FROM broker.broker_add_job('after first', "
                                       "$$INSERT INTO marks VALUES ('after first')$$, p_depends_on_job_ids => %s)",
                                       ([first],)).fetchone()[0]
            after_slow = conn.execute("SELECT job_id FROM broker.broker_add_job('after slow', 'SELECT 1', "
                                      "p_depends_on_job_ids => %s)", ([slow],)).fetchone()[0]
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        wait_until(lambda: outcome(db, slow)[0] == 3 and outcome(db, after_first)[0] == 2, 60, "the jobs", runner)
        status, attempts, sqlstate, _ = outcome(db, slow)
        assert (status, attempts, sqlstate) == (3, 2, "57014")  # timed out twice: retried once, then failed
        assert outcome(db, after_slow)[0] == 4  # its dependent cancelled, as for any failed job
        assert outcome(db, first)[:2] == (2, 1)
        with connect(db) as conn:
            assert sorted(r[0] for r in conn.execute("SELECT job FROM marks")) == ["after first", "first"]


def test_tenancy_attempt_history_and_metrics_are_those_of_every_job(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a:
        with a.as_role(a.etl) as conn:
            conn.execute("CREATE TABLE marks (tenant text, by_role name)")
            conn.execute("CREATE PROCEDURE mark() LANGUAGE plpgsql AS $$BEGIN INSERT INTO marks "
                         "VALUES (current_setting('broker.tenant_id', true), session_user); COMMIT; END $$")
            marked = add_job(conn, "mark", "CALL mark()", tenant_id="acme")
            # the enqueuer's own tenant (default) does not see the job of tenant acme
            assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = %s", (marked,)).fetchone() == (0,)
        with a.as_role(a.maint) as conn:
            missing = add_job(conn, "missing", "VACUUM no_such_table", max_attempts=2)
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        wait_until(lambda: outcome(db, marked)[0] == 2 and outcome(db, missing)[0] == 3, 60, "the jobs", runner)
        assert outcome(db, missing)[:3] == (3, 2, "42P01")  # retried once, then failed for good
        labels = f'{{database="{db}",queue="1"}}'
        runner.wait_for(lambda r: all(f"{name}{labels} 1.0" in r.get("/metrics")[1].decode() for name in (
            "broker_jobs_completed_total", "broker_jobs_retried_total", "broker_jobs_failed_total")), 10, "the metrics")
        with connect(db) as conn:
            # the job ran with its tenant set, as every job does, logged in as its role
            assert conn.execute("SELECT tenant, by_role FROM marks").fetchall() == [("acme", a.etl)]
            history = "SELECT tenant_id, attempt, outcome, error_sqlstate FROM broker.broker_job_attempts " \
                      "WHERE job_id = %s ORDER BY attempt_id"
            assert conn.execute(history, (marked,)).fetchall() == [("acme", 1, "completed", None)]
            assert conn.execute(history, (missing,)).fetchall() == [("default", 1, "failed", "42P01"),
                                                                     ("default", 2, "failed", "42P01")]


@pytest.mark.parametrize("signals, why", [(2, "second signal"), (1, "shutdown deadline passed")])
def test_stopping_interrupts_a_running_autonomous_job_without_counting_its_attempt(db, tmp_path, start, signals, why):
    """A second signal interrupts at once; one signal waits for the job until shutdown_timeout_sec (1 s here) and
    the stop's grace for workers (10 s), then cancels it: either way pending again, attempt not counted."""
    with autonomous_roles(db, tmp_path) as a:
        procedure_objects(a, rows=40_000)
        with a.as_role(a.etl) as conn:
            slow = add_job(conn, "slow", "CALL process_items(1000, 1.0)")
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        with connect(db) as conn:
            wait_until(lambda: conn.execute("SELECT count(*) FROM chunks").fetchone()[0] >= 1, 60, "the procedure", runner)
        runner.signal(signal.SIGTERM)
        if signals == 2:
            runner.wait_for(lambda r: "signal received" in r.log(), 30, "the first signal")
            runner.signal(signal.SIGTERM)
        assert runner.wait(40) == 0
        status, attempts, *_ = outcome(db, slow)
        with connect(db) as conn:
            assert conn.execute("SELECT interruptions FROM broker.broker_jobs WHERE job_id = %s", (slow,)).fetchone() == (1,)
            assert conn.execute("SELECT count(*) < 40 FROM chunks").fetchone() == (True,)  # it did not run to its end
        assert (status, attempts) == (0, 0), runner.log()[-2000:]  # pending again, the attempt not counted
        assert f"job interrupted ({why})" in runner.log(), runner.log()[-3000:]
        assert "Task exception was never retrieved" not in runner.log()


@pytest.mark.parametrize("via", ["login", "set_role"])
def test_cancelling_a_running_autonomous_job_ends_it_cancelled(db, tmp_path, start, via):
    """broker_cancel_job on a running autonomous job: the runner cancels the job's own statement (on the job's
    connection, which may be another login's), the job ends cancelled with the reason, its dependents too."""
    with autonomous_roles(db, tmp_path) as a:
        if via == "login":
            procedure_objects(a, rows=40_000)
            with a.as_role(a.etl) as conn:
                job = add_job(conn, "slow", "CALL process_items(1000, 1.0)")
                after = conn.execute("SELECT job_id FROM broker.broker_add_job('after', 'SELECT 1', "
                                     "p_depends_on_job_ids => %s)", ([job],)).fetchone()[0]
            started = "SELECT count(*) >= 1 FROM chunks"
            blocker = None
        else:
            maintenance_objects(a)
            blocker = connect(db)  # the VACUUM FULL waits for this lock: it is running, and runs as long as we hold it
            blocker.execute("BEGIN")
            blocker.execute("LOCK TABLE orders IN ACCESS SHARE MODE")
            with a.as_role(a.maint) as conn:
                job = add_job(conn, "full", "VACUUM FULL orders")
                after = conn.execute("SELECT job_id FROM broker.broker_add_job('after', 'SELECT 1', "
                                     "p_depends_on_job_ids => %s)", ([job],)).fetchone()[0]
            started = ("SELECT count(*) >= 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND query = 'VACUUM FULL orders'")
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        try:
            with connect(db) as conn:
                wait_until(lambda: conn.execute(started).fetchone()[0], 60, "the job running", runner)
                with a.as_role(a.etl if via == "login" else a.maint) as owner:
                    assert owner.execute("SELECT broker.broker_cancel_job(%s, 'operator says stop')",
                                         (job,)).fetchone() == (1,)
                wait_until(lambda: outcome(db, job)[0] == 4, 30, "the job cancelled", runner)
                assert conn.execute("SELECT cancel_reason, attempts FROM broker.broker_jobs WHERE job_id = %s",
                                    (job,)).fetchone() == ("operator says stop", 1)
                assert conn.execute("SELECT outcome, error_sqlstate FROM broker.broker_job_attempts WHERE job_id = %s",
                                    (job,)).fetchall() == [("cancelled", "57014")]
                assert outcome(db, after)[0] == 4
                if via == "login":
                    assert conn.execute("SELECT count(*) < 40 FROM chunks").fetchone() == (True,)
        finally:
            if blocker is not None:
                blocker.close()
