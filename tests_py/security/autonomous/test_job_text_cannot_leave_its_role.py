"""An autonomous job never acts as the runner's login or broker_runtime. Outside a transaction there is no
SECURITY DEFINER executor to hold it: via set_role the runner's login runs SET ROLE run_as and then exactly one
statement of an allowed kind, via login it is the role itself. So: texts that would change the role back or run a
second statement are refused by the runner's parser check even when they reached the table past the enqueue-time
check (inserted here by a superuser); code the role planted earlier (an index expression's function, an operator,
a materialized view's function, a trigger) runs as the object's owner in a security-restricted operation, where
PostgreSQL refuses RESET ROLE, SET ROLE and SET SESSION AUTHORIZATION; a procedure called on the role's own login
can reach no more than the role. Every attempt fails, and nothing ran as the login (no job was claimed by it)."""
from __future__ import annotations

import time

from autonomous_setup import add_job, autonomous_roles, outcome
from conftest import connect

# code that, would it run as the runner's login, claims a job and leaves a row in table leak
TRY_ALL = """BEGIN
    {change};
    INSERT INTO public.leak SELECT current_user, session_user;
    PERFORM broker.broker_get(1);
    RETURN $1;
END"""
CHANGES = {"reset": "RESET ROLE", "set_runtime": "SET ROLE broker_runtime",
           "set_config": "PERFORM set_config('role', 'broker_runtime', false)",
           "session": "SET SESSION AUTHORIZATION {login}", "none": "NULL"}
OPERATORS = ("<=>", "<==>", "<===>", "<====>", "<=====>")


def raw_job(conn, name: str, role: str, text: str) -> int:
    """An autonomous job inserted past every enqueue-time check (a superuser bypasses row-level security)."""
    return conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_as, enqueued_by, autonomous) "
                        "VALUES (%s, %s, %s, %s, %s, true) RETURNING job_id", (name, name, text, role, role)).fetchone()[0]


def wait_finished(db: str, jobs: dict, runner) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(outcome(db, j)[0] in (2, 3) for j in jobs.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"jobs not finished: { {k: outcome(db, j) for k, j in jobs.items()} }\n{runner.log()[-3000:]}")


def nothing_ran_as_the_login(db: str, a) -> None:
    with connect(db) as conn:
        assert conn.execute("SELECT * FROM public.leak").fetchall() == []
        # the only jobs ever claimed are the test's own (every one finished); none was claimed by job code
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status IN (0, 1)").fetchone() == (0,)


def test_texts_that_would_leave_the_role_are_refused_before_they_run(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a, connect(db) as su:
        su.execute("CREATE TABLE public.leak (who name, session_who name)")
        su.execute("GRANT INSERT ON public.leak TO PUBLIC")
        with a.as_role(a.maint) as conn:
            conn.execute("CREATE TABLE orders (id integer PRIMARY KEY)")
        texts = {
            "second statement": "VACUUM orders; RESET ROLE",
            "second statement after a comment": "VACUUM orders /* ; */; SELECT broker.broker_get(1)",
            "second statement in a line comment's shadow": "VACUUM orders --\n; RESET ROLE",
            "dollar-quoted second statement": "VACUUM orders; DO $$BEGIN RESET ROLE; PERFORM broker.broker_get(1); END$$",
            "RESET ROLE": "RESET ROLE",
            "SET ROLE broker_runtime": "SET ROLE broker_runtime",
            "SET SESSION AUTHORIZATION": f'SET SESSION AUTHORIZATION "{a.runner}"',
            "broker_get": "SELECT broker.broker_get(1)",
            "broker_run": "SELECT broker.broker_run(1)",
            "CALL after SET ROLE": "CALL some_procedure()",
            "plain CREATE INDEX": "CREATE INDEX ON orders (id)",
        }
        jobs = {k: raw_job(su, k, a.maint, t) for k, t in texts.items()}
        texts_login = {"login: second statement": "CALL p(); RESET ROLE",
                       "login: SET ROLE": "SET ROLE broker_runtime",
                       "login: broker_get": "SELECT broker.broker_get(1)"}
        jobs |= {k: raw_job(su, k, a.etl, t) for k, t in texts_login.items()}
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        wait_finished(db, jobs, runner)
        for name, job in jobs.items():
            status, attempts, sqlstate, message = outcome(db, job)
            assert (status, sqlstate) == (3, "42501") and message.startswith("refused: "), (name, outcome(db, job))
        nothing_ran_as_the_login(db, a)


def test_code_planted_earlier_cannot_change_the_role_while_maintenance_runs(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a, connect(db) as su:
        su.execute("CREATE TABLE public.leak (who name, session_who name)")
        su.execute("GRANT INSERT ON public.leak TO PUBLIC")
        jobs = {}
        with a.as_role(a.maint) as conn:
            conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, v integer) WITH (autovacuum_enabled = false)")
            conn.execute("INSERT INTO orders SELECT i, i FROM generate_series(1, 100) AS i")
            conn.execute("CREATE TABLE arm (on_ boolean)")
            for (key, change), op in zip(CHANGES.items(), OPERATORS):
                body = TRY_ALL.format(change=change.format(login=a.runner))
                # an IMMUTABLE lie, so that it may be indexed (and an operator over one); VOLATILE for the view
                conn.execute(f"CREATE FUNCTION f_{key}(integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $f$" + body + "$f$")
                conn.execute(f"CREATE FUNCTION v_{key}(integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS $f$" + body + "$f$")
                conn.execute(f"CREATE FUNCTION eq_{key}(integer, integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$"
                             + body.replace("RETURN $1", "RETURN $1 = $2") + "$f$")
                conn.execute(f"CREATE OPERATOR {op} (FUNCTION = eq_{key}, LEFTARG = integer, RIGHTARG = integer)")
                # the view's query calls the function once armed (below), when the job refreshes it
                conn.execute(f"CREATE MATERIALIZED VIEW mv_{key} AS SELECT id FROM orders "
                             f"UNION ALL SELECT v_{{key}}(-1) FROM arm".replace("{key}", key))
                conn.execute(f"CREATE UNIQUE INDEX ON mv_{key} (id)")
                jobs[f"index {key}"] = add_job(conn, f"index {key}", f"CREATE INDEX CONCURRENTLY ON orders (f_{key}(v))")
                jobs[f"operator {key}"] = add_job(conn, f"operator {key}",
                                                   f"CREATE INDEX CONCURRENTLY ON orders (id) WHERE (v {op} 1)")
                jobs[f"refresh {key}"] = add_job(conn, f"refresh {key}", f"REFRESH MATERIALIZED VIEW CONCURRENTLY mv_{key}")
            conn.execute("INSERT INTO arm VALUES (true)")
            # a trigger: none of the maintenance statements fires one
            conn.execute("CREATE FUNCTION trg() RETURNS trigger LANGUAGE plpgsql AS $f$BEGIN RESET ROLE; "
                         "INSERT INTO public.leak SELECT current_user, session_user; RETURN NULL; END$f$")
            conn.execute("CREATE TRIGGER t AFTER INSERT OR UPDATE OR DELETE ON orders FOR EACH ROW EXECUTE FUNCTION trg()")
            jobs["trigger: vacuum"] = add_job(conn, "trigger: vacuum", "VACUUM (ANALYZE) orders")
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        wait_finished(db, jobs, runner)
        for key in CHANGES:
            for kind in ("index", "operator", "refresh"):
                status, _, sqlstate, message = outcome(db, jobs[f"{kind} {key}"])
                # the role change fails as PostgreSQL refuses it in a security-restricted operation; with no
                # change, broker_get is refused to the role (it is no member of broker_runtime)
                assert status == 3 and sqlstate in ("42501", "0A000"), (kind, key, outcome(db, jobs[f"{kind} {key}"]))
                # (or, in an IMMUTABLE function, before: SET, RESET and INSERT are not allowed there)
                assert ("within security-restricted operation" in message or "permission denied for function broker_get" in message
                        or "is not allowed in a non-volatile function" in message), (kind, key, message)
        assert outcome(db, jobs["trigger: vacuum"])[0] == 2
        nothing_ran_as_the_login(db, a)


def test_a_procedure_on_the_roles_own_login_reaches_no_more_than_the_role(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a, connect(db) as su:
        su.execute("CREATE TABLE public.leak (who name, session_who name)")
        su.execute("GRANT INSERT ON public.leak TO PUBLIC")
        jobs = {}
        with a.as_role(a.etl) as conn:
            for key, change in CHANGES.items():
                body = TRY_ALL.format(change=change.format(login=a.runner)).replace("RETURN $1;", "")
                conn.execute(f"CREATE PROCEDURE p_{key}() LANGUAGE plpgsql AS $f$" + body + "$f$")
                jobs[key] = add_job(conn, f"call {key}", f"CALL p_{key}()")
        runner = start(extra=("--config", str(a.config)), user=a.runner)
        wait_finished(db, jobs, runner)
        for key, job in jobs.items():
            status, _, sqlstate, message = outcome(db, job)
            if key == "reset":  # RESET ROLE on its own login: still itself, and broker_get is not its to call
                assert (status, sqlstate) == (3, "42501") and "broker_get" in message, message
            else:
                assert (status, sqlstate) == (3, "42501"), (key, outcome(db, job))
        with connect(db) as conn:
            # the rows the procedures wrote before broker_get failed were rolled back with it; none names the login
            assert conn.execute("SELECT count(*) FROM public.leak WHERE %s IN (who, session_who)", (a.runner,)).fetchone() == (0,)
        nothing_ran_as_the_login(db, a)
