"""The runner runs claimed jobs several per transaction (broker_run_batch): jobs of different run_as roles
never share one, session changes do not outlive a transaction, and a transaction that fails as a whole
costs the other jobs nothing."""
from __future__ import annotations

from pgsql_broker.states import JobState
from conftest import connect
from job_checks import wait_until


def _statuses(db: str) -> dict[str, int]:
    with connect(db) as conn:
        return dict(conn.execute("SELECT job_name, complete_status FROM broker.broker_jobs").fetchall())


def test_a_failure_at_commit_does_not_cost_the_other_jobs_of_the_batch_an_attempt(db, start):
    with connect(db) as conn:
        conn.execute("CREATE TABLE public.effects (job int)")
        conn.execute("CREATE TABLE public.parent (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE public.child (pid int REFERENCES public.parent DEFERRABLE INITIALLY DEFERRED)")
        # one attempt each (the default): a job that lost its attempt to its neighbour would fail
        conn.execute("""SELECT broker.broker_add_jobs(jsonb_build_array(
            jsonb_build_object('job_name', 'a', 'execute_str', 'INSERT INTO public.effects VALUES (1)'),
            jsonb_build_object('job_name', 'poison', 'execute_str', 'INSERT INTO public.child VALUES (42)'),
            jsonb_build_object('job_name', 'b', 'execute_str', 'INSERT INTO public.effects VALUES (2)')))""")
    # a budget no slow machine spends before the three have started: they share one transaction (under the 200 ms
    # default, a runner or server held up a moment commits 'a' alone and starts the others later, one by one)
    runner = start(db, extra=("--batch-budget-ms", "5000"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    wait_until(lambda: _statuses(db).get("a") == 2 and _statuses(db).get("b") == 2, what="the innocent jobs")
    with connect(db) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT job) FROM public.effects").fetchone() == (2, 2)
        assert conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'poison'").fetchone()[0] == JobState.RUNNING
    assert "a transaction of 3 job(s) failed" in runner.log()


def test_session_settings_of_one_job_do_not_reach_a_job_of_another_role(db, start):
    with connect(db) as conn:
        conn.execute("DO $$ BEGIN CREATE ROLE broker_test_batch_other NOLOGIN; "
                     "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        conn.execute("CREATE TABLE public.seen (who text, datestyle text)")
        conn.execute("GRANT INSERT ON public.seen TO broker_test_batch_other")
        conn.execute("GRANT USAGE ON SCHEMA public TO broker_test_batch_other")
        conn.execute("SELECT broker.broker_create_executor('broker_test_batch_other')")
        conn.execute("""SELECT broker.broker_add_jobs(jsonb_build_array(
            jsonb_build_object('job_name', 'setter', 'execute_str', 'SET DateStyle = ''SQL, DMY'''),
            jsonb_build_object('job_name', 'same role', 'execute_str',
                               'INSERT INTO public.seen SELECT current_user, current_setting(''DateStyle'')'),
            jsonb_build_object('job_name', 'other role', 'run_as', 'broker_test_batch_other', 'execute_str',
                               'INSERT INTO public.seen SELECT current_user, current_setting(''DateStyle'')')))""")
    runner = start(db)
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    wait_until(lambda: set(_statuses(db).values()) == {JobState.COMPLETED}, what="all three jobs")
    with connect(db) as conn:
        seen = dict(conn.execute("SELECT who, datestyle FROM public.seen").fetchall())
    assert seen["broker_test_batch_other"] == "ISO, MDY"  # the other role's job starts from a reset session
    try:
        with connect(db) as conn:
            conn.execute("DROP OWNED BY broker_test_batch_other")
            conn.execute("DROP ROLE broker_test_batch_other")
    except Exception:
        pass


def test_a_job_whose_enqueuer_lost_the_right_fails_and_the_rest_of_its_batch_runs(db, start):
    roles = ("broker_test_rr_alice", "broker_test_rr_bob")
    with connect(db) as conn:
        conn.execute("DO $$ BEGIN CREATE ROLE broker_test_rr_bob NOLOGIN IN ROLE broker_enqueue; "
                     "CREATE ROLE broker_test_rr_alice NOLOGIN IN ROLE broker_enqueue, broker_test_rr_bob; "
                     "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        conn.execute("CREATE TABLE public.effects (v text)")
        conn.execute("GRANT USAGE ON SCHEMA public TO broker_test_rr_bob")
        conn.execute("GRANT INSERT ON public.effects TO broker_test_rr_bob")
        conn.execute("SELECT broker.broker_create_executor('broker_test_rr_bob')")
        conn.execute("SET ROLE broker_test_rr_alice")
        conn.execute("""SELECT broker.broker_add_jobs(jsonb_build_array(
            jsonb_build_object('job_name', 'alice 1', 'run_as', 'broker_test_rr_bob', 'max_attempts', 3,
                               'execute_str', 'INSERT INTO public.effects VALUES (''alice 1'')'),
            jsonb_build_object('job_name', 'alice 2', 'run_as', 'broker_test_rr_bob',
                               'execute_str', 'INSERT INTO public.effects VALUES (''alice 2'')')))""")
        conn.execute("SET ROLE broker_test_rr_bob")
        conn.execute("SELECT broker.broker_add_job('bob', $$INSERT INTO public.effects VALUES ('bob')$$)")
        conn.execute("RESET ROLE")
        conn.execute("REVOKE broker_test_rr_bob FROM broker_test_rr_alice")
    try:
        runner = start(db)
        runner.wait_for(lambda r: r.role(db) == "active", what="active")
        wait_until(lambda: set(_statuses(db).values()) == {JobState.COMPLETED, JobState.FAILED}, what="the three jobs to finish")
        assert _statuses(db) == {"alice 1": 3, "alice 2": 3, "bob": 2}
        with connect(db) as conn:
            assert conn.execute("SELECT array_agg(v) FROM public.effects").fetchone()[0] == ["bob"]
            assert conn.execute("""SELECT DISTINCT last_error_sqlstate || ' ' || last_error_message
                                     FROM broker.broker_jobs WHERE job_name LIKE 'alice%'""").fetchall() == [
                ("42501 enqueuer broker_test_rr_alice may no longer run jobs as broker_test_rr_bob",)]
            conn.execute("SELECT broker.broker_add_job('after', 'SELECT 1')")
        wait_until(lambda: _statuses(db).get("after") == 2, what="a job enqueued afterwards")
        assert '"sqlstate": "42501"' in runner.log() and "enqueuer broker_test_rr_alice may no longer" in runner.log()
    finally:
        with connect(db) as conn:
            for role in roles:
                conn.execute(f"DROP OWNED BY {role}")
            conn.execute("DROP ROLE " + ", ".join(roles))
