-- Code a job leaves for COMMIT (deferred constraint triggers, WITH HOLD cursors) would run as
-- the login that commits, outside the executor: the run refuses such jobs and keeps nothing of
-- them. Here the test itself plays that login: what is still queued when broker_run returns
-- runs as postgres when the test fires it (SET CONSTRAINTS ALL IMMEDIATE, FETCH).
BEGIN;
SELECT plan(14);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE TABLE public.commit_log (who text, what text);
GRANT INSERT ON public.commit_log TO PUBLIC;
GRANT USAGE ON SCHEMA public TO broker_test_mallory;
-- a table of the owner with a deferrable trigger, never written by a job
CREATE TABLE public.untouched (a int);
CREATE FUNCTION public.untouched_trg() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE CONSTRAINT TRIGGER untouched_c AFTER INSERT ON public.untouched DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION public.untouched_trg();

SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('deferred trigger', $$
    CREATE TEMP TABLE t1 (a int);
    CREATE FUNCTION pg_temp.f1() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN INSERT INTO public.commit_log VALUES (current_user, ''deferred''); RETURN NULL; END';
    CREATE CONSTRAINT TRIGGER c1 AFTER INSERT ON t1 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.f1();
    INSERT INTO t1 VALUES (1)$$, p_max_attempts => 1);
SELECT broker.broker_add_job('defers again', $$
    CREATE TEMP TABLE t2 (a int);
    CREATE FUNCTION pg_temp.f2() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN INSERT INTO public.commit_log VALUES (current_user, ''again''); IF NEW.a < 3 THEN SET CONSTRAINTS ALL DEFERRED; INSERT INTO t2 VALUES (NEW.a + 1); END IF; RETURN NULL; END';
    CREATE CONSTRAINT TRIGGER c2 AFTER INSERT ON t2 DEFERRABLE INITIALLY IMMEDIATE FOR EACH ROW EXECUTE FUNCTION pg_temp.f2();
    SET CONSTRAINTS ALL DEFERRED;
    INSERT INTO t2 VALUES (1)$$, p_max_attempts => 1);
SELECT broker.broker_add_job('security definer trigger', $$
    CREATE TEMP TABLE t3 (a int);
    CREATE FUNCTION pg_temp.f3() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS 'BEGIN INSERT INTO public.commit_log VALUES (current_user, ''definer''); RETURN NULL; END';
    CREATE CONSTRAINT TRIGGER c3 AFTER INSERT ON t3 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.f3();
    INSERT INTO t3 VALUES (1)$$, p_max_attempts => 1);
SELECT broker.broker_add_job('exclusion expression', $$
    CREATE FUNCTION pg_temp.f4(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN $1; END';
    CREATE TEMP TABLE t4 (a int, EXCLUDE USING btree ((pg_temp.f4(a)) WITH =) DEFERRABLE INITIALLY DEFERRED);
    INSERT INTO t4 VALUES (1), (1)$$, p_max_attempts => 1);
SELECT broker.broker_add_job('holdable cursor', $$
    CREATE FUNCTION pg_temp.f5() RETURNS SETOF text LANGUAGE plpgsql AS 'BEGIN INSERT INTO public.commit_log VALUES (current_user, ''cursor''); RETURN NEXT current_user; END';
    DECLARE c5 CURSOR WITH HOLD FOR SELECT * FROM pg_temp.f5()$$, p_max_attempts => 1);
SELECT broker.broker_add_job('foreign key', $$
    CREATE TEMP TABLE p6 (id int PRIMARY KEY);
    CREATE TEMP TABLE c6 (id int REFERENCES p6 DEFERRABLE INITIALLY DEFERRED, UNIQUE (id) DEFERRABLE INITIALLY DEFERRED);
    INSERT INTO c6 VALUES (1); INSERT INTO p6 VALUES (1)$$, p_max_attempts => 1);
SELECT broker.broker_add_job('plain', $$INSERT INTO public.commit_log VALUES (current_user, 'plain')$$, p_max_attempts => 1);
RESET ROLE;

SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE outcome AS
SELECT g.job_name, r.complete_status, r.error_sqlstate, r.error_message
  FROM broker.broker_get(1, NULL, 60, 100) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
RESET ROLE;

SELECT results_eq($$SELECT job_name, error_sqlstate FROM outcome
                     WHERE job_name IN ('deferred trigger', 'defers again', 'security definer trigger',
                                        'exclusion expression', 'holdable cursor') ORDER BY job_name$$,
    $$VALUES ('deferred trigger', '42501'), ('defers again', '42501'), ('exclusion expression', '42501'),
             ('holdable cursor', '42501'), ('security definer trigger', '42501')$$,
    'jobs that leave a deferred trigger or a holdable cursor for COMMIT fail with 42501');
SELECT is((SELECT count(*) FROM outcome WHERE complete_status = 3 AND job_name <> 'plain' AND job_name NOT LIKE 'foreign key%'),
          5::bigint, 'and are failed (no attempts left)');
SELECT matches((SELECT error_message FROM outcome WHERE job_name = 'deferred trigger'),
               '^refused: the job modified table t1, which has the DEFERRABLE constraint trigger c1; .*NOT DEFERRABLE',
               'the message says what was left and what to do');
SELECT matches((SELECT error_message FROM outcome WHERE job_name = 'holdable cursor'),
               '^refused: the job left the WITH HOLD cursor c5 open', 'the cursor is named');
SELECT is((SELECT count(*) FROM pg_cursors WHERE is_holdable), 0::bigint, 'no holdable cursor is left open');
SELECT lives_ok('SET CONSTRAINTS ALL IMMEDIATE', 'firing what is still deferred, as the committing login');
SELECT is((SELECT array_agg(who || ':' || what ORDER BY what) FROM public.commit_log),
          ARRAY['broker_test_mallory:plain'], 'nothing of the refused jobs is left to run as the login');
SELECT is((SELECT count(*) FROM pg_class WHERE relname IN ('t1', 't2', 't3', 't4') AND relpersistence = 't'),
          0::bigint, 'their temporary tables were rolled back with them');
SELECT is((SELECT complete_status FROM outcome WHERE job_name = 'foreign key'), 2::smallint,
          'deferrable foreign keys and unique constraints are allowed');
SELECT is((SELECT count(*) FROM pg_class WHERE relname IN ('p6', 'c6') AND relpersistence = 't'), 2::bigint,
          'and kept (their checks run as the table owner, whoever commits)');
SELECT is((SELECT complete_status FROM outcome WHERE job_name = 'plain'), 2::smallint,
          'a job next to a table with a deferrable trigger it does not write runs');

-- a batch: only the job that left code for COMMIT is refused, its batch-mates run (also those
-- after it, though the refused job's writes still count in the transaction's statistics)
GRANT INSERT ON public.untouched TO broker_test_mallory;
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('batch good 1', $$INSERT INTO public.commit_log VALUES (current_user, 'good 1')$$);
SELECT broker.broker_add_job('batch bad', $$INSERT INTO public.untouched VALUES (1); DECLARE c8 CURSOR WITH HOLD FOR SELECT 1$$,
                             p_max_attempts => 1);
SELECT broker.broker_add_job('batch good 2', $$INSERT INTO public.commit_log VALUES (current_user, 'good 2')$$);
RESET ROLE;
SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE claimed AS SELECT * FROM broker.broker_get(1, NULL, 60, 100);
CREATE TEMP TABLE batch AS
SELECT * FROM broker.broker_run_batch((SELECT array_agg(job_id ORDER BY job_id) FROM claimed),
                                      (SELECT array_agg(lease_token ORDER BY job_id) FROM claimed));
RESET ROLE;
SELECT results_eq($$SELECT j.job_name, b.complete_status, b.error_sqlstate FROM batch b JOIN broker.broker_jobs j USING (job_id)
                     ORDER BY b.job_id$$,
    $$VALUES ('batch good 1', 2::smallint, NULL::text), ('batch bad', 3::smallint, '42501'), ('batch good 2', 2::smallint, NULL)$$,
    'in a batch only the offending job is refused');
SELECT is((SELECT array_agg(what ORDER BY what) FROM public.commit_log WHERE what LIKE 'good%'), ARRAY['good 1', 'good 2'],
          'its batch-mates'' effects are kept');
SELECT is((SELECT count(*) FROM pg_cursors WHERE is_holdable) + (SELECT count(*) FROM public.untouched), 0::bigint,
          'and nothing of the refused job is left');

SELECT * FROM finish();
ROLLBACK;
