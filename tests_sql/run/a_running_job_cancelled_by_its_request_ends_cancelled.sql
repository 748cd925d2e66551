-- broker_cancel_job on a running job: a cancel request (broker_job_actions) and a NOTIFY for
-- its runner; when the statement running the job is cancelled (57014) the job ends cancelled
-- with the reason and its dependents are cancelled. A run that ends otherwise keeps its
-- outcome; a 57014 without a request is an ordinary failed attempt. (The runner's cancel is
-- played here by the job raising query_canceled, or cancelling its own backend.)
BEGIN;
SELECT plan(20);

SELECT broker.broker_add_job('long', 'BEGIN RAISE query_canceled; END', 1, p_job_language => 'plpgsql', p_job_group => 'long',
                             p_max_attempts => 3);
SELECT broker.broker_add_job('after long', 'SELECT 1', 2, p_depends_on_groups => ARRAY['long']);
SELECT broker.broker_add_job('after that', 'SELECT 1', 2, p_depends_on_groups => ARRAY['after long']);
CREATE TEMP TABLE got AS SELECT job_id, lease_token FROM broker.broker_get(1);

-- the request: recorded, the job untouched, the runner told (LISTEN sees it at commit, see tests_py)
SELECT is(broker.broker_cancel_job((SELECT job_id FROM got), 'operator: stop it'), 1, 'a running job: 1, the request');
SELECT results_eq($$SELECT action, reason, requested_by FROM broker.broker_job_actions$$,
                  $$VALUES ('cancel'::text, 'operator: stop it'::text, CURRENT_USER::name)$$, 'the request is recorded');
SELECT results_eq($$SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'long'$$, $$VALUES (1::smallint)$$,
                  'the job is still running until its statement is cancelled');
SELECT is(broker._cancel_requested((SELECT job_id FROM got)), 'operator: stop it', '_cancel_requested names the reason');

-- its statement is cancelled: cancelled (4), not retried although it has attempts left
SELECT results_eq($$SELECT complete_status, error_sqlstate FROM broker.broker_run_batch(
                      (SELECT array_agg(job_id) FROM got), (SELECT array_agg(lease_token) FROM got))$$,
                  $$VALUES (4::smallint, '57014'::text)$$, 'the run reports it cancelled');
SELECT results_eq($$SELECT complete_status, cancel_reason, lease_token IS NULL FROM broker.broker_jobs WHERE job_name = 'long'$$,
                  $$VALUES (4::smallint, 'operator: stop it'::text, true)$$, 'cancelled with the reason, lease gone');
SELECT results_eq($$SELECT job_name, complete_status FROM broker.broker_jobs WHERE job_name LIKE 'after%' ORDER BY job_id$$,
                  $$VALUES ('after long'::text, 4::smallint), ('after that', 4::smallint)$$, 'its dependents are cancelled, transitively');
SELECT ok((SELECT bool_and(cancel_cause_job_id = (SELECT job_id FROM got)) FROM broker.broker_jobs WHERE job_name LIKE 'after%'),
          'and record which job cancelled them');
SELECT results_eq($$SELECT attempt, outcome, error_sqlstate FROM broker.broker_job_attempts$$,
                  $$VALUES (1, 'cancelled'::text, '57014'::text)$$, 'the attempt history says cancelled');
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM got)), '55000',
    format('broker_cancel_job: job %s is cancelled; only pending or running jobs can be cancelled', (SELECT job_id FROM got)),
    'cancelling it again: 55000');

-- the same through broker_run, the job cancelling its own backend as the runner would
SELECT broker.broker_add_job('self', 'SELECT pg_cancel_backend(pg_backend_pid()); SELECT pg_sleep(30)', 3);
CREATE TEMP TABLE self AS SELECT job_id, lease_token FROM broker.broker_get(3);
SELECT broker.broker_cancel_job((SELECT job_id FROM self));
SELECT results_eq($$SELECT complete_status, error_sqlstate FROM broker.broker_run((SELECT job_id FROM self), (SELECT lease_token FROM self))$$,
                  $$VALUES (4::smallint, '57014'::text)$$, 'broker_run: a cancelled statement under a request ends cancelled');
SELECT alike((SELECT cancel_reason FROM broker.broker_jobs WHERE job_name = 'self'), 'cancelled by %', 'with the default reason');

-- a 57014 without a request (say a statement_timeout) is a failed attempt, retried
SELECT broker.broker_add_job('timeout', 'BEGIN RAISE query_canceled; END', 4, p_job_language => 'plpgsql', p_max_attempts => 2);
CREATE TEMP TABLE t AS SELECT job_id, lease_token FROM broker.broker_get(4);
SELECT results_eq($$SELECT complete_status FROM broker.broker_run_batch((SELECT array_agg(job_id) FROM t), NULL)$$,
                  $$VALUES (0::smallint)$$, 'no request: 57014 is a failed attempt, retried');

-- a run that finishes before the cancel lands keeps its result (the request is made while it runs;
-- one made before the run starts cancels it unrun: a_job_cancelled_before_it_starts_never_runs.sql)
SELECT broker.broker_add_job('quick', $$SELECT broker.broker_cancel_job(j.job_id, 'too late') FROM broker.broker_jobs AS j
                                         WHERE j.job_name = 'quick'$$, 5);
CREATE TEMP TABLE q AS SELECT job_id, lease_token FROM broker.broker_get(5);
SELECT results_eq($$SELECT complete_status FROM broker.broker_run_batch((SELECT array_agg(job_id) FROM q), NULL)$$,
                  $$VALUES (2::smallint)$$, 'a run that completes keeps its result');
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM q)), '55000', NULL,
                 'and cancelling it afterwards: 55000');

-- a job that fails on its own under a request is not run again
SELECT broker.broker_add_job('fails', 'SELECT 1/0', 6, p_max_attempts => 5);
CREATE TEMP TABLE f AS SELECT job_id, lease_token FROM broker.broker_get(6);
SELECT broker.broker_cancel_job((SELECT job_id FROM f), 'stop retrying');
SELECT results_eq($$SELECT complete_status FROM broker.broker_run_batch((SELECT array_agg(job_id) FROM f), NULL)$$,
                  $$VALUES (4::smallint)$$, 'failed under a request with attempts left: cancelled, not retried');

-- a run interrupted by its runner's stop, or lost with its lease, under a request: cancelled, not run again
SELECT broker.broker_add_job('interrupted', 'SELECT 1', 8, p_max_attempts => 3);
SELECT broker.broker_add_job('lost', 'SELECT 1', 8, p_max_attempts => 3);
CREATE TEMP TABLE il AS SELECT job_id, job_name, lease_token FROM broker.broker_get(8, NULL, 60, 2);
SELECT broker.broker_cancel_job(job_id, 'stop ' || job_name) FROM il;
SELECT broker.broker_interrupt_jobs(ARRAY[job_id], ARRAY[lease_token]) FROM il WHERE job_name = 'interrupted';
UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second' WHERE job_name = 'lost';
SELECT broker.broker_recover_stale_jobs();
SELECT results_eq($$SELECT job_name, complete_status, cancel_reason FROM broker.broker_jobs WHERE job_queue = 8 ORDER BY job_id$$,
                  $$VALUES ('interrupted'::text, 4::smallint, 'stop interrupted'::text), ('lost', 4::smallint, 'stop lost')$$,
                  'interrupted or lost under a request: cancelled with its reason');
SELECT results_eq($$SELECT a.outcome FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j USING (job_id)
                     WHERE j.job_queue = 8 ORDER BY j.job_id$$,
                  $$VALUES ('interrupted'::text), ('lost')$$, 'each attempt as it ended');

-- a request is only for a running job
SELECT broker.broker_add_job('pending', 'SELECT 1', 7);
SELECT throws_ok($$INSERT INTO broker.broker_job_actions (job_id, action)
                   SELECT job_id, 'cancel' FROM broker.broker_jobs WHERE job_name = 'pending'$$, '55000', NULL,
                 'a cancel request for a pending job written directly: 55000');
SELECT throws_ok($$INSERT INTO broker.broker_job_actions (job_id, action, reason)
                   SELECT job_id, 'cancel', repeat('x', 2001) FROM broker.broker_jobs WHERE job_name = 'pending'$$, '23514', NULL,
                 'a reason over 2,000 characters: 23514');

SELECT * FROM finish();
ROLLBACK;
