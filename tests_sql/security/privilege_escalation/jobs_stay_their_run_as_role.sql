-- Jobs run as their run_as role and cannot get back to the runner's privileges.
BEGIN;
SELECT plan(21);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE TABLE public.run_as_secret (v text);
INSERT INTO public.run_as_secret VALUES ('untouched');
CREATE TABLE public.run_as_out (who text, what text);
GRANT INSERT ON public.run_as_out TO broker_test_alice;
GRANT USAGE ON SCHEMA public TO broker_test_alice;

-- alice enqueues, as herself; the runner (broker_runtime) runs
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_job('whoami', $$INSERT INTO public.run_as_out SELECT current_user, session_user$$);
SELECT broker.broker_add_job('plain', $$INSERT INTO public.run_as_secret VALUES ('plain')$$);
SELECT broker.broker_add_job('reset role', $$RESET ROLE; INSERT INTO public.run_as_secret VALUES ('reset role')$$);
SELECT broker.broker_add_job('set role', $$SET ROLE postgres; INSERT INTO public.run_as_secret VALUES ('set role')$$);
SELECT broker.broker_add_job('set local role', $$SET LOCAL ROLE broker_runtime; SELECT broker.broker_get(1)$$);
SELECT broker.broker_add_job('session auth', $$SET SESSION AUTHORIZATION postgres; INSERT INTO public.run_as_secret VALUES ('sa')$$);
SELECT broker.broker_add_job('set_config', $$SELECT set_config('role', 'postgres', false); INSERT INTO public.run_as_secret VALUES ('cfg')$$);
SELECT broker.broker_add_job('do block', $$BEGIN EXECUTE 'RESET ROLE'; INSERT INTO public.run_as_secret VALUES ('do'); END$$,
                             1, 0, 'plpgsql');
SELECT broker.broker_add_job('own function', $$CREATE FUNCTION pg_temp.esc() RETURNS void LANGUAGE plpgsql AS 'BEGIN RESET ROLE; INSERT INTO public.run_as_secret VALUES (''fn''); END'; SELECT pg_temp.esc()$$);
SELECT broker.broker_add_job('broker tables', $$UPDATE broker.broker_jobs SET complete_status = 2$$);
SELECT broker.broker_add_job('broker delete', $$DELETE FROM broker.broker_job_dependency$$);
SELECT broker.broker_add_job('claim', $$SELECT broker.broker_get(1)$$);
SELECT broker.broker_add_job('escalating child', $$SELECT broker.broker_add_job('child', 'SELECT 1', p_run_as => 'postgres')$$);
SELECT broker.broker_add_job('child', $$SELECT broker.broker_add_job('grandchild', 'SELECT 1')$$);
RESET ROLE;

SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE run_as = 'broker_test_alice'), 14::bigint, 'fourteen jobs run as alice');
SELECT ok(broker._executor('broker_test_alice') IS NOT NULL, 'enqueueing created alice''s executor');
SELECT is((SELECT proowner::regrole::text || ' ' || prosecdef FROM pg_proc WHERE oid = broker._executor('broker_test_alice')),
          'broker_test_alice true', 'owned by alice, SECURITY DEFINER');
SELECT ok(NOT has_function_privilege('public', broker._executor('broker_test_alice'), 'EXECUTE'), 'PUBLIC cannot call it');
SELECT ok((SELECT proconfig @> ARRAY['search_path=pg_catalog, pg_temp'] FROM pg_proc
            WHERE oid = broker._executor('broker_test_alice')), 'its search_path is pinned');

SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE outcome AS
SELECT g.job_name, r.complete_status, r.error_sqlstate, r.error_message
  FROM broker.broker_get(1, NULL, 60, 100) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
RESET ROLE;

SELECT is((SELECT who || '/' || what FROM public.run_as_out), 'broker_test_alice/postgres',
          'the job ran as alice (session_user is the runner''s login)');
SELECT is((SELECT error_sqlstate FROM outcome WHERE job_name = 'plain'), '42501', 'a table alice cannot write: 42501');
SELECT matches((SELECT error_message FROM outcome WHERE job_name = 'plain'),
               'permission denied for table run_as_secret \(the job runs as role broker_test_alice; needed: GRANT [A-Z, ]*INSERT[A-Z, ]* ON TABLE public.run_as_secret TO broker_test_alice\)',
               'the error says which GRANT the job needs');
SELECT results_eq($$SELECT job_name, error_sqlstate FROM outcome
                     WHERE job_name IN ('reset role', 'set role', 'set local role', 'session auth', 'set_config', 'do block', 'own function')
                     ORDER BY job_name$$,
    $$VALUES ('do block', '42501'), ('own function', '42501'), ('reset role', '42501'), ('session auth', '42501'),
             ('set local role', '42501'), ('set role', '42501'), ('set_config', '42501')$$,
    'RESET ROLE, SET ROLE, SET LOCAL ROLE, SET SESSION AUTHORIZATION, set_config(role), DO blocks and own functions all fail');
SELECT matches((SELECT error_message FROM outcome WHERE job_name = 'reset role'),
               'cannot set parameter "role" within security-definer function', 'refused by PostgreSQL itself');
SELECT is((SELECT array_agg(v) FROM public.run_as_secret), ARRAY['untouched'], 'no escape attempt changed anything');
SELECT is((SELECT error_sqlstate FROM outcome WHERE job_name = 'broker tables'), '42501', 'a job cannot update broker tables');
SELECT is((SELECT error_sqlstate FROM outcome WHERE job_name = 'broker delete'), '42501', 'nor delete from them');
SELECT is((SELECT error_sqlstate FROM outcome WHERE job_name = 'claim'), '42501', 'nor claim jobs');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2 AND job_name <> 'whoami' AND job_name <> 'child'),
          0::bigint, 'no job was marked completed by another');
SELECT is((SELECT error_sqlstate FROM outcome WHERE job_name = 'escalating child'), '42501',
          'a job cannot enqueue a job that runs as a superuser');
SELECT is((SELECT complete_status FROM outcome WHERE job_name = 'child'), 2::smallint, 'a job may enqueue ordinary follow-ups');
SELECT is((SELECT run_as || '/' || enqueued_by FROM broker.broker_jobs WHERE job_name = 'grandchild'),
          'broker_test_alice/broker_test_alice', 'which run as, and are enqueued by, the job''s role');
SELECT is((SELECT count(*) FROM outcome WHERE complete_status = 3), 12::bigint, 'twelve attempts failed and nothing else');

-- an executor that went missing fails the job with the command that fixes it
CREATE ROLE broker_test_carol NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_carol;
CREATE TEMP TABLE carol_job AS SELECT job_id FROM broker.broker_add_job('carol', 'SELECT 1', 7);
RESET ROLE;
SELECT lives_ok(format('DROP FUNCTION %s', broker._executor('broker_test_carol')), 'drop carol''s executor');
SELECT is((SELECT error_message FROM broker.broker_get(7) AS g, LATERAL broker.broker_run(g.job_id) AS r),
          'role broker_test_carol has no job executor; run SELECT broker.broker_create_executor(''broker_test_carol'') as that role or a superuser',
          'a missing executor fails the job and says what to run');

SELECT * FROM finish();
ROLLBACK;
