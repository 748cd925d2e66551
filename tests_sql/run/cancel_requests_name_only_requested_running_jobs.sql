-- broker_cancel_requests, the runner's check behind a cancel NOTIFY: of the jobs it is given, it names
-- those still running with a cancel request for their current attempt, whatever their tenant, and
-- nothing else (a job without a request, a pending or finished one, a request made for an earlier
-- attempt); more than 1000 ids are refused with 22023.
BEGIN;
SELECT plan(5);

SELECT broker.broker_add_job('asked', 'SELECT 1', 1);
SELECT broker.broker_add_job('not asked', 'SELECT 1', 1);
SELECT broker.broker_add_job('asked before', 'SELECT 1', 1);
SELECT broker.broker_add_job('pending', 'SELECT 1', 2);
SELECT broker.broker_get(1, NULL, 60, 3);
SELECT broker.broker_cancel_job(job_id, 'stop') FROM broker.broker_jobs WHERE job_name IN ('asked', 'asked before');
-- a request made before the current attempt started is an earlier attempt's
UPDATE broker.broker_job_actions SET requested_at = j.started_at - interval '1 second'
  FROM broker.broker_jobs AS j
 WHERE j.job_id = broker_job_actions.job_id AND j.job_name = 'asked before';
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_job('acme asked', 'SELECT 1', 3);
SELECT broker.broker_get(3);
SELECT broker.broker_cancel_job(job_id, 'acme stops it') FROM broker.broker_jobs WHERE job_name = 'acme asked';
SELECT broker.broker_set_tenant('default');
CREATE TEMP TABLE ids AS SELECT job_name, job_id FROM broker.broker_jobs;
GRANT SELECT ON ids TO broker_runtime;

SET LOCAL ROLE broker_runtime;
SELECT results_eq($$SELECT job_id FROM broker.broker_cancel_requests((SELECT array_agg(job_id) FROM ids))$$,
                  $$SELECT job_id FROM ids WHERE job_name IN ('asked', 'acme asked') ORDER BY job_id$$,
                  'the running jobs with a request for their current attempt, of every tenant');
SELECT is_empty($$SELECT * FROM broker.broker_cancel_requests((SELECT array_agg(job_id) FROM ids
                                                               WHERE job_name IN ('not asked', 'asked before', 'pending')))$$,
                'no request, a request of an earlier attempt, a pending job: none');
SELECT is_empty($$SELECT * FROM broker.broker_cancel_requests('{}')$$, 'no ids: none');
SELECT throws_ok($$SELECT * FROM broker.broker_cancel_requests(ARRAY(SELECT generate_series(1, 1001)::bigint))$$,
                 '22023', 'broker_cancel_requests: at most 1000 jobs per call, got 1001', 'more than 1000 ids: 22023');
RESET ROLE;

SELECT broker.broker_run_batch(ARRAY[job_id], NULL) FROM ids WHERE job_name = 'asked';
SELECT is_empty($$SELECT * FROM broker.broker_cancel_requests((SELECT array_agg(job_id) FROM ids WHERE job_name = 'asked'))$$,
                'a job that finished under its request is no longer named');

SELECT * FROM finish();
ROLLBACK;
