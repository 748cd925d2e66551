-- A cancel request made for a claimed job before the run that would take it up starts (the job
-- waits in its runner for a worker, or behind the transaction of jobs before it): the run never
-- starts it, nor does a later claim when its runner hands it back unrun. It ends cancelled with
-- the request's reason, its attempt recorded cancelled and its dependents cancelled, and the jobs
-- around it run as usual. (A request that lands while the job runs, which the job outlives, leaves
-- it its result: a_running_job_cancelled_by_its_request_ends_cancelled.sql.)
BEGIN;
SELECT plan(10);

CREATE TABLE public.broker_test_effects (job text);
SELECT broker.broker_add_job('first', $$INSERT INTO public.broker_test_effects VALUES ('first')$$, 1);
SELECT broker.broker_add_job('second', $$INSERT INTO public.broker_test_effects VALUES ('second')$$, 1, p_job_group => 'second');
SELECT broker.broker_add_job('third', $$INSERT INTO public.broker_test_effects VALUES ('third')$$, 1);
SELECT broker.broker_add_job('after second', 'SELECT 1', 2, p_depends_on_groups => ARRAY['second']);
CREATE TEMP TABLE got AS SELECT job_id, job_name, lease_token FROM broker.broker_get(1, NULL, 60, 3);

SELECT is(broker.broker_cancel_job((SELECT job_id FROM got WHERE job_name = 'second'), 'not this one'), 1,
          'the request for the claimed job, before its run');
SELECT results_eq($$SELECT b.job_id, b.complete_status, b.error_sqlstate
                      FROM broker.broker_run_batch((SELECT array_agg(job_id ORDER BY job_id) FROM got),
                                                   (SELECT array_agg(lease_token ORDER BY job_id) FROM got)) AS b$$,
                  $$SELECT job_id, CASE WHEN job_name = 'second' THEN 4::smallint ELSE 2::smallint END,
                           CASE WHEN job_name = 'second' THEN '57014' END FROM got ORDER BY job_id$$,
                  'broker_run_batch reports it cancelled, the others completed');
SELECT results_eq($$SELECT job FROM public.broker_test_effects ORDER BY job$$, $$VALUES ('first'::text), ('third')$$,
                  'it never ran; the jobs around it did');
SELECT results_eq($$SELECT complete_status, cancel_reason FROM broker.broker_jobs WHERE job_name = 'second'$$,
                  $$VALUES (4::smallint, 'not this one'::text)$$, 'cancelled with the request''s reason');
SELECT results_eq($$SELECT a.outcome, a.error_sqlstate FROM broker.broker_job_attempts AS a
                      JOIN broker.broker_jobs AS j USING (job_id) WHERE j.job_name = 'second'$$,
                  $$VALUES ('cancelled'::text, '57014'::text)$$, 'its attempt is recorded cancelled');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'after second'), 4::smallint,
          'its dependents are cancelled');

-- broker_run, one job
SELECT broker.broker_add_job('alone', $$INSERT INTO public.broker_test_effects VALUES ('alone')$$, 3);
CREATE TEMP TABLE one AS SELECT job_id, lease_token FROM broker.broker_get(3);
SELECT broker.broker_cancel_job((SELECT job_id FROM one), 'not this one either');
SELECT results_eq($$SELECT complete_status, error_sqlstate FROM broker.broker_run((SELECT job_id FROM one), (SELECT lease_token FROM one))$$,
                  $$VALUES (4::smallint, '57014'::text)$$, 'broker_run: cancelled, not run');
SELECT is((SELECT count(*) FROM public.broker_test_effects WHERE job = 'alone'), 0::bigint, 'no effect');

-- handed back unrun by its runner (broker_release_jobs: the claim's budget spent, a stop): cancelled, not
-- pending again (claimed anew, its request would no longer be for its current attempt)
SELECT broker.broker_add_job('handed back', $$INSERT INTO public.broker_test_effects VALUES ('handed back')$$, 5,
                             p_job_group => 'handed back');
SELECT broker.broker_add_job('after handed back', 'SELECT 1', 6, p_depends_on_groups => ARRAY['handed back']);
CREATE TEMP TABLE h AS SELECT job_id, lease_token FROM broker.broker_get(5);
SELECT broker.broker_cancel_job((SELECT job_id FROM h), 'not after all');
SELECT is((SELECT count(*) FROM broker.broker_release_jobs((SELECT array_agg(job_id) FROM h), (SELECT array_agg(lease_token) FROM h))),
          1::bigint, 'released by its runner');
SELECT results_eq($$SELECT job_name, complete_status, cancel_reason FROM broker.broker_jobs
                     WHERE job_name IN ('handed back', 'after handed back') ORDER BY job_id$$,
                  $$VALUES ('handed back'::text, 4::smallint, 'not after all'::text),
                           ('after handed back', 4::smallint, 'dependency job ' || (SELECT job_id FROM h) || ' (handed back) was cancelled')$$,
                  'it ends cancelled with its request''s reason, its dependents too');

SELECT * FROM finish();
ROLLBACK;
