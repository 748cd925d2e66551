"""A 0.2.0 database in use upgrades to this version by either install path: jobs in every state (pending,
running, completed, failed, cancelled), dependencies by id and by group, a job parked for later, another
tenant's job and a schedule are all there afterwards, unchanged; the schema is exactly a fresh install's
(the catalog comparison of pgsql_broker.install.catalog: columns, constraints, indexes, types, triggers,
policies, functions' definitions, grants, comments); and a runner then runs the pending jobs and, after
them, their dependents.

0.2.0 here is the frozen release (extension/pgsql_broker--0.2.0.sql and --0.1.0--0.2.0.sql, as shipped),
so the data is written with 0.2.0's own functions."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from conftest import ROLES_SQL, add_job, connect, dsn
from job_checks import wait_until
from pgsql_broker.install import catalog, install
from pgsql_broker.install.scripts import control_version
from pgsql_broker.states import JobState

FROM = "0.2.0"
FAR_AWAY = datetime(9000, 1, 1, tzinfo=timezone.utc)  # a job dated later whatever the clock says
JOBS = """SELECT job_id, tenant_id, job_name, job_group, job_queue, complete_status, pending_deps, attempts,
                 lease_token, run_after, last_error_sqlstate, cancel_cause_job_id, schedule_id, enqueued_by
            FROM broker.broker_jobs ORDER BY job_id"""
EDGES = "SELECT job_id, depends_on_job_id, depends_on_group FROM broker.broker_job_dependency ORDER BY 1, 2, 3"
SCHEDULES = """SELECT schedule_id, schedule_name, cron_expr, execute_str, enabled, next_fire_at, created_by, run_as
                 FROM broker.broker_schedule ORDER BY 1"""


def _data(conn) -> tuple:
    """Every tenant's rows (the test login is a superuser, which row-level security lets through)."""
    return tuple(conn.execute(q).fetchall() for q in (JOBS, EDGES, SCHEDULES))


def _fill_0_2_0(conn) -> dict[str, int]:
    """Jobs in every state, id and group dependencies, a schedule: written through 0.2.0's functions."""
    conn.execute("CREATE TABLE public.out (n serial, v text)")
    ids: dict[str, int] = {}

    def job(name: str, sql: str, **params) -> int:
        ids[name] = add_job(conn, name, sql, **params)
        return ids[name]

    write = "INSERT INTO public.out (v) VALUES ('{}')".format
    first = job("extract", write("extract"))
    job("load", write("load"), depends_on_job_ids=[first])
    job("part a", write("part a"), job_group="parts")
    job("part b", write("part b"), job_group="parts")
    job("report", write("report"), depends_on_groups=["parts"])
    job("someday", write("someday"), run_after=FAR_AWAY)
    # queue 2: one completed, one failed (and its dependent cancelled), one claimed (running)
    job("done", "SELECT 1", job_queue=2)
    job("broken", "SELECT 1/0", job_queue=2, max_attempts=1)
    job("after broken", "SELECT 1", job_queue=2, depends_on_job_ids=[ids["broken"]])
    ran = conn.execute("SELECT g.job_name FROM broker.broker_get(2, NULL, 60, 10) AS g, "
                       "LATERAL broker.broker_run(g.job_id, g.lease_token) AS r ORDER BY 1").fetchall()
    assert ran == [("broken",), ("done",)]
    job("claimed", "SELECT 1", job_queue=3)
    assert conn.execute("SELECT count(*) FROM broker.broker_get(3, NULL, 3600)").fetchone()[0] == 1
    with conn.transaction():
        conn.execute("SELECT broker.broker_set_tenant('acme')")
        job("acme", write("acme"))
    conn.execute("SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'SELECT 1')")
    states = dict(conn.execute("SELECT job_name, complete_status FROM broker.broker_jobs").fetchall())
    assert {states[n] for n in ("extract", "load", "part a", "report", "someday", "acme")} == {JobState.PENDING}
    assert (states["done"], states["broken"], states["after broken"], states["claimed"]) == (
        JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.RUNNING)
    return ids


@pytest.mark.parametrize("no_extension", [False, True], ids=["extension", "migrations"])
def test_a_0_2_0_database_in_use_upgrades_and_runs_on(no_extension, empty_db, template_db, start):
    quiet = lambda msg: None  # noqa: E731
    state = install(dsn(empty_db), no_extension=no_extension, target=FROM, log=quiet)
    assert (state.version, state.path) == (FROM, "migrations" if no_extension else "extension")
    with connect(empty_db) as conn:
        ids = _fill_0_2_0(conn)
        before = _data(conn)

    state = install(dsn(empty_db), no_extension=no_extension, log=quiet)
    assert state.version == control_version()
    with connect(empty_db) as conn:
        conn.execute(ROLES_SQL)
        assert _data(conn) == before, "the upgrade changed jobs, dependencies or schedules"
        # the one job dated later is parked until due; no other is
        assert conn.execute("SELECT job_name FROM broker.broker_jobs WHERE parked <> 0").fetchall() == [("someday",)]
        upgraded = catalog.snapshot(conn, privileges=True)
    with connect(template_db) as conn:
        fresh = catalog.snapshot(conn, privileges=True)
    assert catalog.differences(fresh, upgraded) == []

    runner = start(empty_db)
    waiting = ("extract", "load", "part a", "part b", "report", "acme")
    with connect(empty_db) as conn:
        def all_done() -> bool:
            assert runner.proc.poll() is None, runner.log()[-3000:]
            done = conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) AND complete_status = %s",
                                ([ids[n] for n in waiting], JobState.COMPLETED)).fetchone()[0]
            return done == len(waiting)
        wait_until(all_done, 60, "the upgraded database's pending jobs and their dependents to complete")
        order = [v for (v,) in conn.execute("SELECT v FROM public.out ORDER BY n")]
        assert sorted(order) == sorted(["extract", "load", "part a", "part b", "report", "acme"])
        assert order.index("extract") < order.index("load")
        assert order.index("report") > max(order.index("part a"), order.index("part b"))
        states = dict(conn.execute("SELECT job_name, complete_status FROM broker.broker_jobs").fetchall())
        # the finished jobs stay as they were, the one dated later still waits
        assert (states["done"], states["broken"], states["after broken"], states["someday"]) == (
            JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.PENDING)
