-- broker_run: effects and completion commit together; failures roll back and keep the error.
BEGIN;
SELECT plan(21);
CREATE TABLE public.run_effects (v text);

-- success
CREATE TEMP TABLE j1 AS SELECT job_id FROM broker.broker_add_job('ok',
    $$INSERT INTO public.run_effects VALUES ('one'); INSERT INTO public.run_effects VALUES ('two')$$);
CREATE TEMP TABLE c1 AS SELECT * FROM broker.broker_get(1);
CREATE TEMP TABLE r1 AS SELECT * FROM broker.broker_run((SELECT job_id FROM j1), (SELECT lease_token FROM c1));
SELECT results_eq($$SELECT complete_status, attempts, error_sqlstate, error_message FROM r1$$,
    $$VALUES (2::smallint, 1, NULL::text, NULL::text)$$, 'broker_run returns the outcome');
SELECT is((SELECT array_agg(v ORDER BY v) FROM public.run_effects), ARRAY['one', 'two'], 'a multi-statement job ran');
SELECT results_eq($$SELECT complete_status, lease_token IS NULL, lease_expires_at IS NULL, finished_at IS NOT NULL
                      FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM j1)$$,
    $$VALUES (2::smallint, true, true, true)$$, 'completed: status 2, lease cleared, finished_at set');

-- failure: the job's own effects roll back, the error is kept
CREATE TEMP TABLE j2 AS SELECT job_id FROM broker.broker_add_job('bad',
    $$INSERT INTO public.run_effects VALUES ('partial'); SELECT 1/0$$);
SELECT broker.broker_get(1);
CREATE TEMP TABLE r2 AS SELECT * FROM broker.broker_run((SELECT job_id FROM j2));
SELECT results_eq($$SELECT complete_status, error_sqlstate, error_message FROM r2$$,
    $$VALUES (3::smallint, '22012', 'division by zero')$$, 'a failing job reports its SQLSTATE and message');
SELECT is((SELECT count(*) FROM public.run_effects WHERE v = 'partial'), 0::bigint, 'its partial effects were rolled back');
SELECT results_eq($$SELECT complete_status, last_error_sqlstate, last_error_message FROM broker.broker_jobs
                     WHERE job_id = (SELECT job_id FROM j2)$$,
    $$VALUES (3::smallint, '22012', 'division by zero')$$, 'failed with one attempt; the error is stored');

-- plpgsql jobs run as an anonymous block
CREATE TEMP TABLE j3 AS SELECT job_id FROM broker.broker_add_job('block',
    $$DECLARE n int := 3; BEGIN FOR i IN 1..n LOOP INSERT INTO public.run_effects VALUES ('loop' || i); END LOOP; END$$,
    1, 0, 'plpgsql');
SELECT broker.broker_get(1);
SELECT is((SELECT complete_status FROM broker.broker_run((SELECT job_id FROM j3))), 2::smallint, 'plpgsql job completed');
SELECT is((SELECT count(*) FROM public.run_effects WHERE v LIKE 'loop%'), 3::bigint, 'its loop ran');

-- plpgsql errors raised by the job are kept with their SQLSTATE
CREATE TEMP TABLE j4 AS SELECT job_id FROM broker.broker_add_job('raise',
    $$BEGIN RAISE EXCEPTION 'custom failure' USING ERRCODE = 'P0042'; END$$, 1, 0, 'plpgsql');
SELECT broker.broker_get(1);
SELECT results_eq($$SELECT error_sqlstate, error_message FROM broker.broker_run((SELECT job_id FROM j4))$$,
    $$VALUES ('P0042', 'custom failure')$$, 'a raised error keeps its SQLSTATE');

-- the job sees its own tenant; the caller's tenant is restored afterwards
SELECT broker.broker_set_tenant('acme');
CREATE TEMP TABLE j5 AS SELECT job_id FROM broker.broker_add_job('tenant probe',
    $$INSERT INTO public.run_effects VALUES ('tenant=' || current_setting('broker.tenant_id'))$$);
SELECT broker.broker_set_tenant('other');
SELECT broker.broker_get(1);
SELECT broker.broker_run((SELECT job_id FROM j5));
SELECT is((SELECT v FROM public.run_effects WHERE v LIKE 'tenant=%'), 'tenant=acme', 'the job ran with its own tenant');
SELECT is(current_setting('broker.tenant_id'), 'other', 'the caller''s tenant is restored');
SELECT broker.broker_set_tenant('default');

-- wrong state and wrong lease
CREATE TEMP TABLE j6 AS SELECT job_id FROM broker.broker_add_job('pending', 'SELECT 1');
SELECT throws_ok(format('SELECT broker.broker_run(%s)', (SELECT job_id FROM j6)), '55000',
    format('broker_run: job %s is pending, not running', (SELECT job_id FROM j6)), 'running a pending job: 55000');
SELECT throws_ok(format('SELECT broker.broker_run(%s)', (SELECT job_id FROM j1)), '55000', NULL,
    'running a completed job again: 55000');
SELECT throws_ok('SELECT broker.broker_run(987654321)', 'P0002', NULL, 'unknown job: P0002');
SELECT broker.broker_get(1);
SELECT throws_ok(format('SELECT broker.broker_run(%s, %L)', (SELECT job_id FROM j6), gen_random_uuid()), '55000', NULL,
    'a stale lease token: 55000');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM j6)), 1::smallint,
          'the refused run changed nothing');

-- a job that calls broker_add_job enqueues follow-ups that commit with it
CREATE TEMP TABLE j7 AS SELECT job_id FROM broker.broker_add_job('parent',
    $$SELECT broker.broker_add_job('child', 'SELECT 1', 2)$$);
SELECT broker.broker_get(1);
SELECT broker.broker_run((SELECT job_id FROM j7));
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'child' AND job_queue = 2), 1::bigint,
          'a job can enqueue jobs');

-- per-job timeout: statement_timeout cancels the job, the attempt fails, broker_run still returns
CREATE TEMP TABLE j8 AS SELECT job_id FROM broker.broker_add_job('slow', 'SELECT pg_sleep(5)', 5,
    p_timeout => interval '200 milliseconds');
CREATE TEMP TABLE c8 AS SELECT * FROM broker.broker_get(5);
SELECT is((SELECT job_timeout FROM c8), interval '200 milliseconds', 'broker_get returns the job timeout');
SET LOCAL statement_timeout = 200;
CREATE TEMP TABLE r8 AS SELECT * FROM broker.broker_run((SELECT job_id FROM j8));
RESET statement_timeout;
SELECT results_eq($$SELECT complete_status, error_sqlstate FROM r8$$, $$VALUES (3::smallint, '57014')$$,
    'a job cancelled by statement_timeout fails with 57014');
SELECT ok((SELECT duration < interval '3 seconds' FROM r8), 'the timeout stopped it early');
SELECT is((SELECT last_error_message FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM j8)),
          'canceling statement due to statement timeout', 'the timeout message is kept');

SELECT * FROM finish();
ROLLBACK;
