"""A job that needs only TEMP leaves code for COMMIT (a deferred constraint trigger, a WITH HOLD cursor
over a pg_temp function): with a real runner logged in as a broker_runtime login, nothing of it ever
runs as that login, and other tenants' jobs run on."""
from __future__ import annotations

import pytest

from conftest import connect
from tenant_logins import enqueue_as, tenant_logins

TRIGGER_JOB = """CREATE TEMP TABLE t (a int);
CREATE FUNCTION pg_temp.f() RETURNS trigger LANGUAGE plpgsql AS
  'BEGIN INSERT INTO public.login_only VALUES (current_user, session_user, ''trigger''); RETURN NULL; END';
CREATE CONSTRAINT TRIGGER c AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.f();
INSERT INTO t VALUES (1)"""
CURSOR_JOB = """CREATE FUNCTION pg_temp.g() RETURNS SETOF text LANGUAGE plpgsql AS
  'BEGIN INSERT INTO public.login_only VALUES (current_user, session_user, ''cursor''); RETURN NEXT ''x''; END';
DECLARE c CURSOR WITH HOLD FOR SELECT * FROM pg_temp.g()"""


@pytest.fixture
def logins(db):
    """mallory (enqueue, tenant evil) and victim (enqueue, tenant good) under strict tenancy, and the runner's
    login (broker_runtime only); public.login_only is writable by the runner's login alone."""
    with tenant_logins(db, {"mallory": "evil", "victim": "good"}) as names:
        with connect(db) as owner:
            owner.execute("CREATE TABLE public.login_only (who text, sess text, what text)")
            owner.execute(f'GRANT INSERT ON public.login_only TO "{names["runner"]}"')
            owner.execute("CREATE TABLE public.victim_out (n int)")
            owner.execute(f'GRANT INSERT ON public.victim_out TO "{names["victim"]}"')
            owner.execute(f'GRANT USAGE ON SCHEMA public TO "{names["mallory"]}", "{names["victim"]}"')
        yield names


def finished(db: str, jobs: list[int]) -> bool:
    with connect(db) as owner:
        return owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) AND complete_status >= 2",
                             (jobs,)).fetchone()[0] == len(jobs)


def test_code_left_for_commit_never_runs_as_the_runner_login(db, logins, start):
    bad = [enqueue_as(db, logins["mallory"], "evil", "trigger", TRIGGER_JOB),
           enqueue_as(db, logins["mallory"], "evil", "cursor", CURSOR_JOB)]
    good = [enqueue_as(db, logins["victim"], "good", f"v{i}", f"INSERT INTO public.victim_out VALUES ({i})")
            for i in range(3)]
    runner = start(db, user=logins["runner"])
    runner.wait_for(lambda r: finished(db, bad + good), what="all jobs finished")
    with connect(db) as owner:
        assert owner.execute("SELECT * FROM public.login_only").fetchall() == []
        rows = owner.execute("SELECT job_name, complete_status, last_error_sqlstate, last_error_message "
                             "FROM broker.broker_jobs WHERE job_id = ANY(%s) ORDER BY job_id", (bad,)).fetchall()
        assert [(r[0], r[1], r[2]) for r in rows] == [("trigger", 3, "42501"), ("cursor", 3, "42501")]
        assert all(r[3].startswith("refused: ") for r in rows)
        assert owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) AND complete_status = 2",
                             (good,)).fetchone()[0] == 3
        assert owner.execute("SELECT count(*) FROM public.victim_out").fetchone()[0] == 3


def test_another_sessions_temporary_table_does_not_stop_jobs(db, logins, start):
    # mallory keeps a session open with a temp table that has a deferrable trigger on it
    with connect(db, user=logins["mallory"]) as mallory:
        mallory.execute("CREATE TEMP TABLE bait (a int)")
        mallory.execute("CREATE FUNCTION pg_temp.b() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'")
        mallory.execute("CREATE CONSTRAINT TRIGGER bait_c AFTER INSERT ON bait DEFERRABLE INITIALLY DEFERRED "
                        "FOR EACH ROW EXECUTE FUNCTION pg_temp.b()")
        good = [enqueue_as(db, logins["victim"], "good", f"v{i}", f"INSERT INTO public.victim_out VALUES ({i})")
                for i in range(3)]
        runner = start(db, user=logins["runner"])
        runner.wait_for(lambda r: finished(db, good), what="the victim's jobs finished")
        with connect(db) as owner:
            assert owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                 "AND complete_status = 2", (good,)).fetchone()[0] == 3


def test_temporary_tables_on_commit_work_in_the_read_only_commit(db, logins, start):
    """After broker_run_batch returned, the runner's transaction is read-only (defense in depth); a job's
    temporary table ON COMMIT DROP / DELETE ROWS and its dependents' release still work."""
    first = enqueue_as(db, logins["victim"], "good", "on commit",
                    "CREATE TEMP TABLE oc (a int) ON COMMIT DROP; CREATE TEMP TABLE od (a int) ON COMMIT DELETE ROWS; "
                    "INSERT INTO oc VALUES (1); INSERT INTO od VALUES (1); "
                    "INSERT INTO public.victim_out SELECT count(*) FROM oc")
    with connect(db, user=logins["victim"], autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant('good')")
        child = conn.execute("SELECT job_id FROM broker.broker_add_job('child', 'SELECT 1', "
                             "p_depends_on_job_ids => ARRAY[%s]::bigint[])", (first,)).fetchone()[0]
        conn.commit()
    runner = start(db, user=logins["runner"])
    runner.wait_for(lambda r: finished(db, [first, child]), what="the job and its dependent finished")
    with connect(db) as owner:
        assert owner.execute("SELECT array_agg(complete_status ORDER BY job_id) FROM broker.broker_jobs "
                             "WHERE job_id IN (%s, %s)", (first, child)).fetchone() == ([2, 2],)
    assert "read-only transaction" not in runner.log()
