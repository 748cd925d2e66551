-- broker_run_batch under a budget (p_budget = the statement_timeout in effect): a job still running when the
-- budget's timeout fires is rolled back alone, marked run_alone and returned claimed (PB002), its attempt not
-- counted; the jobs before it commit, the ones after it do not start. Nothing here depends on how fast the
-- machine is: the short jobs take a millisecond of a budget of 2 s, the long one would sleep for a minute.
BEGIN;
SELECT plan(20);

CREATE TABLE public.budget_effects (v text);
CREATE TABLE public.budget_gate ();  -- a row opens it: the gated job then returns at once
-- sleeps a minute until the gate opens (the same job, unchanged, runs long in the batch and short alone)
CREATE FUNCTION pg_temp.jobs(q integer) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT format('[
        {"job_name": "before", "execute_str": "INSERT INTO public.budget_effects VALUES (''before'')", "job_queue": %1$s},
        {"job_name": "long", "job_queue": %1$s,
         "execute_str": "INSERT INTO public.budget_effects VALUES (''long''); SELECT pg_sleep(CASE WHEN EXISTS (SELECT FROM public.budget_gate) THEN 0 ELSE 60 END)"},
        {"job_name": "after", "execute_str": "INSERT INTO public.budget_effects VALUES (''after'')", "job_queue": %1$s}]', q)::jsonb
$f$;
SELECT broker.broker_add_jobs(pg_temp.jobs(1)::jsonb);
CREATE TEMP TABLE claimed AS SELECT g.job_id, g.lease_token, g.job_name FROM broker.broker_get(1, NULL, 60, 10) AS g;

SET LOCAL statement_timeout = '2s';
CREATE TEMP TABLE out1 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed ORDER BY job_id), ARRAY(SELECT lease_token FROM claimed ORDER BY job_id), '2s');
SET LOCAL statement_timeout = 0;
SELECT is(ARRAY(SELECT c.job_name FROM out1 JOIN claimed AS c USING (job_id)), ARRAY['before', 'long'],
          'rows for the job before and the job the budget ended; the job after it did not start');
SELECT is(ARRAY(SELECT ROW(complete_status, error_sqlstate)::text FROM out1),
          ARRAY[ROW(2, NULL)::text, ROW(NULL, 'PB002')::text], 'before completed; long: PB002, not failed');
SELECT is(ARRAY(SELECT v FROM public.budget_effects ORDER BY v), ARRAY['before'], 'the long job''s effects rolled back alone');
SELECT is((SELECT ROW(complete_status, attempts, run_alone, last_error_sqlstate)::text FROM broker.broker_jobs WHERE job_name = 'long'),
          ROW(1, 1, true, NULL)::text, 'long: still claimed, its one attempt, marked run_alone, no error recorded');
SELECT is((SELECT ROW(complete_status, attempts)::text FROM broker.broker_jobs WHERE job_name = 'after'), ROW(1, 1)::text,
          'after: still claimed, not started (the caller passes it again)');
SELECT ok((SELECT error_message FROM out1 WHERE error_sqlstate = 'PB002') LIKE '%ran past the batch budget%',
          'the PB002 row says why');

-- the caller passes the rest again: under a budget, a run_alone job is not run at all
SET LOCAL statement_timeout = '2s';
CREATE TEMP TABLE out2 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed WHERE job_name <> 'before' ORDER BY job_id),
    ARRAY(SELECT lease_token FROM claimed WHERE job_name <> 'before' ORDER BY job_id), '2s');
SET LOCAL statement_timeout = 0;
SELECT is(ARRAY(SELECT ROW(complete_status, error_sqlstate)::text FROM out2), ARRAY[ROW(NULL, 'PB002')::text],
          'a job marked run_alone: PB002 at once, nothing after it run');
SELECT ok((SELECT error_message FROM out2) LIKE '%runs alone%', 'it says it runs alone');
-- alone (no budget), the gate open: it runs, on the attempt of its claim
INSERT INTO public.budget_gate DEFAULT VALUES;
SELECT is((SELECT ROW(complete_status, attempts)::text FROM broker.broker_run_batch(
              ARRAY(SELECT job_id FROM claimed WHERE job_name = 'long'), ARRAY(SELECT lease_token FROM claimed WHERE job_name = 'long'))),
          ROW(2, 1)::text, 'run alone it completes, with one attempt: the budget consumed none');
SET LOCAL statement_timeout = '2s';
SELECT is((SELECT complete_status FROM broker.broker_run_batch(
              ARRAY(SELECT job_id FROM claimed WHERE job_name = 'after'), ARRAY(SELECT lease_token FROM claimed WHERE job_name = 'after'), '2s')),
          2::smallint, 'a budget holds for a single job too');
SET LOCAL statement_timeout = 0;
DELETE FROM public.budget_gate;

-- a job that catches the budget's cancel itself only delays its own batch: no job starts after it
SELECT broker.broker_add_jobs('[
    {"job_name": "s1", "execute_str": "INSERT INTO public.budget_effects VALUES (''s1'')", "job_queue": 2},
    {"job_name": "swallows", "job_queue": 2, "job_language": "plpgsql",
     "execute_str": "BEGIN PERFORM pg_sleep(60); EXCEPTION WHEN query_canceled THEN INSERT INTO public.budget_effects VALUES (''swallowed''); END"},
    {"job_name": "s2", "execute_str": "INSERT INTO public.budget_effects VALUES (''s2'')", "job_queue": 2}]');
CREATE TEMP TABLE claimed2 AS SELECT g.job_id, g.lease_token, g.job_name FROM broker.broker_get(2, NULL, 60, 10) AS g;
SET LOCAL statement_timeout = '2s';
CREATE TEMP TABLE out3 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed2 ORDER BY job_id), ARRAY(SELECT lease_token FROM claimed2 ORDER BY job_id), '2s');
SET LOCAL statement_timeout = 0;
SELECT is(ARRAY(SELECT c.job_name || ':' || o.complete_status FROM out3 AS o JOIN claimed2 AS c USING (job_id)),
          ARRAY['s1:2', 'swallows:2'], 'the job that caught the cancel completed; the job after it did not start');
SELECT is((SELECT run_alone FROM broker.broker_jobs WHERE job_name = 'swallows'), false, 'it is not marked: it ended by itself');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 's2'), 1::smallint, 's2 still claimed, not started');

-- timeouts under a budget: shorter than the budget, the job runs alone (PB002 at once); longer, it is batched
SELECT broker.broker_add_jobs('[
    {"job_name": "t long", "execute_str": "INSERT INTO public.budget_effects VALUES (''t long'')", "job_queue": 3, "timeout": "1 min"},
    {"job_name": "t2 long", "execute_str": "INSERT INTO public.budget_effects VALUES (''t2 long'')", "job_queue": 3, "timeout": "1 min"},
    {"job_name": "t short", "execute_str": "INSERT INTO public.budget_effects VALUES (''t short'')", "job_queue": 3, "timeout": "1 s"}]');
CREATE TEMP TABLE claimed3 AS SELECT g.job_id, g.lease_token, g.job_name FROM broker.broker_get(3, NULL, 60, 10) AS g;
SET LOCAL statement_timeout = '2s';
CREATE TEMP TABLE out4 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed3 ORDER BY job_id), ARRAY(SELECT lease_token FROM claimed3 ORDER BY job_id), '2s');
SET LOCAL statement_timeout = 0;
SELECT is(ARRAY(SELECT c.job_name || ':' || coalesce(o.complete_status::text, o.error_sqlstate) FROM out4 AS o JOIN claimed3 AS c USING (job_id)),
          ARRAY['t long:2', 't2 long:2', 't short:PB002'],
          'jobs with a timeout above the budget run in the batch; one with a shorter timeout runs alone');
SELECT is((SELECT run_alone FROM broker.broker_jobs WHERE job_name = 't short'), false, 'its timeout says it, nothing is marked');

-- without a budget nothing changes: a job with a timeout only runs first, a run_alone job runs in a batch
SELECT is((SELECT count(*) FROM broker.broker_run_batch(
              ARRAY(SELECT job_id FROM claimed3 WHERE job_name = 't short'), ARRAY(SELECT lease_token FROM claimed3 WHERE job_name = 't short'))),
          1::bigint, 'no budget: the job with a short timeout runs first of its call');

SELECT throws_ok($$SELECT * FROM broker.broker_run_batch(ARRAY[1]::bigint[], NULL, '1s')$$, '22023',
    'broker_run_batch: p_budget 00:00:01 needs statement_timeout = 00:00:01 set before this statement, not 0',
    'a budget without its statement_timeout: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_run_batch(ARRAY[1]::bigint[], NULL, '0s')$$, '22023', NULL, 'a budget of 0: 22023');

-- the job running names itself in application_name (others see it in pg_stat_activity at once)
SELECT broker.broker_add_job('who', 'INSERT INTO public.budget_effects VALUES (current_setting(''application_name''))', 4);
SELECT is((SELECT complete_status FROM broker.broker_run_batch(ARRAY(SELECT g.job_id FROM broker.broker_get(4) AS g))), 2::smallint, 'ran');
SELECT is((SELECT v FROM public.budget_effects WHERE v LIKE 'pgsql_broker job %'),
          (SELECT 'pgsql_broker job ' || job_id FROM broker.broker_jobs WHERE job_name = 'who'), 'application_name named it while it ran');

SELECT * FROM finish();
ROLLBACK;
