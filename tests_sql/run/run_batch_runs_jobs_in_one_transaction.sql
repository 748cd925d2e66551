-- broker_run_batch: several claimed jobs in one transaction, each in its own subtransaction, never mixing roles or tenants.
BEGIN;
SELECT plan(23);

CREATE TABLE public.batch_effects (v text);
CREATE ROLE broker_test_batch NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_batch;
GRANT INSERT ON public.batch_effects TO broker_test_batch;

SELECT broker.broker_add_jobs('[
    {"job_name": "a", "execute_str": "INSERT INTO public.batch_effects VALUES (''a'')", "job_queue": 2},
    {"job_name": "bad", "execute_str": "INSERT INTO public.batch_effects VALUES (''bad''); SELECT 1/0", "job_queue": 2},
    {"job_name": "b", "execute_str": "INSERT INTO public.batch_effects VALUES (''b'')", "job_queue": 2},
    {"job_name": "as other role", "execute_str": "INSERT INTO public.batch_effects VALUES (''other'')", "job_queue": 2,
     "run_as": "broker_test_batch"},
    {"job_name": "c", "execute_str": "INSERT INTO public.batch_effects VALUES (''c'')", "job_queue": 2},
    {"job_name": "timed", "execute_str": "INSERT INTO public.batch_effects VALUES (''timed'')", "job_queue": 2, "timeout": "1 min"}]');
CREATE TEMP TABLE claimed AS SELECT g.job_id, g.lease_token, g.job_name FROM broker.broker_get(2, NULL, 60, 10) AS g;
SELECT is((SELECT count(*) FROM claimed), 6::bigint, 'six jobs claimed');

CREATE TEMP TABLE out1 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed ORDER BY job_id), ARRAY(SELECT lease_token FROM claimed ORDER BY job_id));
SELECT is(ARRAY(SELECT c.job_name FROM out1 JOIN claimed AS c USING (job_id)), ARRAY['a', 'bad', 'b'],
          'it runs jobs of the first job''s role in order and stops before another role');
SELECT is(ARRAY(SELECT complete_status FROM out1), ARRAY[2, 3, 2]::smallint[], 'outcomes like broker_run');
SELECT is((SELECT error_sqlstate FROM out1 WHERE complete_status = 3), '22012', 'the failing job''s error is kept');
SELECT is(ARRAY(SELECT v FROM public.batch_effects ORDER BY v), ARRAY['a', 'b'], 'the failing job rolled back alone');

-- the caller passes the rest again (after resetting the session)
CREATE TEMP TABLE rest AS SELECT * FROM claimed WHERE job_id NOT IN (SELECT job_id FROM out1);
CREATE TEMP TABLE out2 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM rest ORDER BY job_id), ARRAY(SELECT lease_token FROM rest ORDER BY job_id));
SELECT is(ARRAY(SELECT c.job_name FROM out2 JOIN claimed AS c USING (job_id)), ARRAY['as other role'],
          'a job of another run_as role runs in a batch of its own');
SELECT is((SELECT v FROM public.batch_effects WHERE v = 'other'), 'other', 'as its role');
DELETE FROM rest WHERE job_id IN (SELECT job_id FROM out2);
CREATE TEMP TABLE out3 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM rest ORDER BY job_id), ARRAY(SELECT lease_token FROM rest ORDER BY job_id));
SELECT is(ARRAY(SELECT c.job_name FROM out3 JOIN claimed AS c USING (job_id)), ARRAY['c'],
          'a job with a timeout is not run after another one');
CREATE TEMP TABLE out4 AS SELECT * FROM broker.broker_run_batch(ARRAY(SELECT job_id FROM claimed WHERE job_name = 'timed'));
SELECT is((SELECT complete_status FROM out4), 2::smallint, 'it runs first in a call of its own (the caller sets its timeout)');

-- jobs that cannot run get a row, not an error
SELECT is((SELECT ROW(complete_status, error_sqlstate)::text FROM broker.broker_run_batch(
              ARRAY(SELECT job_id FROM claimed WHERE job_name = 'a'))),
          ROW(NULL::smallint, '55000')::text, 'a job that is no longer running: 55000 in its row');
SELECT is((SELECT ROW(complete_status, error_sqlstate)::text FROM broker.broker_run_batch(ARRAY[987654321]::bigint[])),
          ROW(NULL::smallint, 'P0002')::text, 'an unknown job: P0002 in its row');
SELECT broker.broker_add_job('stolen', 'SELECT 1', 3);
CREATE TEMP TABLE stolen AS SELECT g.job_id FROM broker.broker_get(3) AS g;
SELECT is((SELECT error_sqlstate FROM broker.broker_run_batch(ARRAY(SELECT job_id FROM stolen), ARRAY[gen_random_uuid()])),
          '55000', 'another lease''s token: 55000 in its row');
SELECT throws_ok(format('SELECT * FROM broker.broker_run_batch(ARRAY[%1$s, %1$s]::bigint[])', (SELECT job_id FROM stolen)),
                 '22023', format('broker_run_batch: job %s is given more than once', (SELECT job_id FROM stolen)),
                 'a job id given twice: 22023 (it would run twice)');

-- the jobs a batch completed release their dependents (each member of a group once)
SELECT broker.broker_add_jobs('[{"job_name": "m1", "execute_str": "SELECT 1", "job_queue": 5, "job_group": "bg"},
                                {"job_name": "m2", "execute_str": "SELECT 1", "job_queue": 5, "job_group": "bg"},
                                {"job_name": "after both", "execute_str": "SELECT 1", "job_queue": 6, "depends_on_groups": ["bg"]}]');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'after both'), 2, 'the dependent waits on both members');
SELECT broker.broker_run_batch(ARRAY(SELECT g.job_id FROM broker.broker_get(5, NULL, 60, 10) AS g ORDER BY g.job_id));
SELECT is((SELECT ROW(pending_deps, (SELECT count(*) FROM broker.broker_jobs WHERE job_group = 'bg' AND complete_status = 2))::text
             FROM broker.broker_jobs WHERE job_name = 'after both'), ROW(0, 2::bigint)::text,
          'both completed in one batch: the dependent is ready');

-- an executor made before run_jobs existed: the batch runs its jobs one run_job call each,
-- and broker_create_executor adds run_jobs to it
SELECT broker.broker_add_jobs('[
    {"job_name": "c1", "execute_str": "INSERT INTO public.batch_effects VALUES (''c1'')", "job_queue": 8, "run_as": "broker_test_batch"},
    {"job_name": "c2", "execute_str": "INSERT INTO public.batch_effects VALUES (''c2''); SELECT 1/0", "job_queue": 8, "run_as": "broker_test_batch"},
    {"job_name": "c3", "execute_str": "INSERT INTO public.batch_effects VALUES (''c3'')", "job_queue": 8, "run_as": "broker_test_batch"}]');
DO $$ BEGIN EXECUTE format('DROP FUNCTION %I.run_jobs(text[], text[], text[], text)', 'broker_exec_' || 'broker_test_batch'::regrole::oid); END $$;
SELECT is(broker._executor_jobs(broker._executor('broker_test_batch')), NULL, 'an executor without run_jobs');
CREATE TEMP TABLE out5 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT g.job_id FROM broker.broker_get(8, NULL, 60, 10) AS g ORDER BY g.job_id));
SELECT is(ARRAY(SELECT complete_status FROM out5), ARRAY[2, 3, 2]::smallint[], 'runs a batch job by job, with the same outcomes');
SELECT is(ARRAY(SELECT v FROM public.batch_effects WHERE v LIKE 'c_' ORDER BY v), ARRAY['c1', 'c3'], 'the failing job rolled back alone');
SELECT broker.broker_create_executor('broker_test_batch');
SELECT is(broker._executor_jobs(broker._executor('broker_test_batch')),
          format('%I.run_jobs', 'broker_exec_' || 'broker_test_batch'::regrole::oid), 'broker_create_executor adds run_jobs to it');

-- session state a job leaves behind never reaches the next job of the batch: each starts with its
-- own search_path and the batch's tenant, also when its search_path is the one just in effect
CREATE TABLE public.batch_seen (name text, path text, tenant text);
SELECT broker.broker_add_jobs('[
    {"job_name": "changes both", "job_queue": 9, "search_path": "public",
     "execute_str": "SELECT set_config(''search_path'', ''pg_catalog'', true), set_config(''broker.tenant_id'', ''other'', true)"},
    {"job_name": "sees", "job_queue": 9, "search_path": "public",
     "execute_str": "INSERT INTO batch_seen VALUES (''sees'', pg_catalog.current_setting(''search_path''), pg_catalog.current_setting(''broker.tenant_id''))"},
    {"job_name": "sees too", "job_queue": 9, "search_path": "public",
     "execute_str": "INSERT INTO batch_seen VALUES (''sees too'', pg_catalog.current_setting(''search_path''), pg_catalog.current_setting(''broker.tenant_id''))"}]');
CREATE TEMP TABLE out6 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT g.job_id FROM broker.broker_get(9, NULL, 60, 10) AS g ORDER BY g.job_id));
SELECT is(ARRAY(SELECT complete_status FROM out6), ARRAY[2, 2, 2]::smallint[], 'three jobs of one batch');
SELECT is(ARRAY(SELECT ROW(name, path, tenant)::text FROM public.batch_seen ORDER BY name),
          ARRAY[ROW('sees', 'public, pg_temp', 'default')::text, ROW('sees too', 'public, pg_temp', 'default')::text],
          'the job after one that changed search_path and broker.tenant_id runs with its own values');

SELECT throws_ok($$SELECT * FROM broker.broker_run_batch(NULL)$$, '22004', NULL, 'NULL ids: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_run_batch(ARRAY[1, 2]::bigint[], ARRAY[gen_random_uuid()])$$, '22023', NULL,
    'a token list of another length: 22023');

SELECT * FROM finish();
ROLLBACK;
