-- broker_retry_job: a failed or cancelled job is pending again with fresh attempts; with its
-- dependents (the default) the jobs cancelled because of it, transitively, come back too and
-- the DAG runs to completion; a job that also waits on another failed job is cancelled again
-- because of that one; every other state is refused with a SQLSTATE.
BEGIN;
SELECT plan(24);
\ir ../lib/run_next.psql

-- extract -> transform -> (load, report); report also waits on the group 'audit'
CREATE TABLE pg_temp.flag (ok boolean);
INSERT INTO pg_temp.flag VALUES (false);
SELECT broker.broker_add_job('extract', 'SELECT 1 / (CASE WHEN ok THEN 1 ELSE 0 END) FROM pg_temp.flag', 1, p_job_group => 'extract');
SELECT broker.broker_add_job('transform', 'SELECT 1', 1, p_job_group => 'transform', p_depends_on_groups => ARRAY['extract']);
SELECT broker.broker_add_job('load', 'SELECT 1', 1, p_job_group => 'load', p_depends_on_groups => ARRAY['transform']);
SELECT broker.broker_add_job('audit', 'SELECT 1/0', 2, p_job_group => 'audit');
SELECT broker.broker_add_job('report', 'SELECT 1', 1, p_depends_on_groups => ARRAY['transform', 'audit']);
CREATE TEMP TABLE ids AS SELECT job_name, job_id FROM broker.broker_jobs;

SELECT is(pg_temp.run_next(2), 'audit', 'audit runs');
SELECT is(pg_temp.run_next(1), 'extract', 'extract runs');
SELECT results_eq($$SELECT job_name, complete_status FROM broker.broker_jobs ORDER BY job_id$$,
                  $$VALUES ('extract'::text, 3::smallint), ('transform', 4::smallint), ('load', 4::smallint),
                           ('audit', 3::smallint), ('report', 4::smallint)$$, 'both failed; the DAG below them is cancelled');

-- the errors first
SELECT throws_ok('SELECT broker.broker_retry_job(NULL)', '22004', NULL, 'NULL id: 22004');
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s, NULL, NULL)', (SELECT job_id FROM ids WHERE job_name = 'extract')),
                 '22004', NULL, 'NULL p_with_dependents: 22004');
SELECT throws_ok('SELECT broker.broker_retry_job(987654321)', 'P0002', 'broker_retry_job: job 987654321 does not exist',
                 'unknown job: P0002');
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM ids WHERE job_name = 'load')), '55000',
                 format('broker_retry_job: job %s waits on job %s, which was cancelled', (SELECT job_id FROM ids WHERE job_name = 'load'),
                        (SELECT job_id FROM ids WHERE job_name = 'transform')),
                 'a job whose dependency was cancelled: 55000, retry that one');

-- retry extract: transform, load and report come back; report also waits on audit (failed): cancelled again
UPDATE pg_temp.flag SET ok = true;
SELECT is(broker.broker_retry_job((SELECT job_id FROM ids WHERE job_name = 'extract')), 3,
          'extract and transform, load come back (report is cancelled again because of audit)');
SELECT results_eq($$SELECT job_name, complete_status, attempts, finished_at IS NULL FROM broker.broker_jobs
                     WHERE job_name IN ('extract', 'transform', 'load') ORDER BY job_id$$,
                  $$VALUES ('extract'::text, 0::smallint, 0, true), ('transform', 0::smallint, 0, true), ('load', 0::smallint, 0, true)$$,
                  'pending with fresh attempts');
SELECT results_eq($$SELECT job_name, pending_deps FROM broker.broker_jobs WHERE job_name IN ('extract', 'transform', 'load') ORDER BY job_id$$,
                  $$VALUES ('extract'::text, 0), ('transform', 1), ('load', 1)$$, 'each waits on what it depends on again');
SELECT results_eq($$SELECT complete_status, cancel_cause_job_id FROM broker.broker_jobs WHERE job_name = 'report'$$,
                  format('VALUES (4::smallint, %s::bigint)', (SELECT job_id FROM ids WHERE job_name = 'audit')),
                  'report is cancelled again, because of audit');
SELECT is((SELECT count(*) FROM broker.broker_job_actions WHERE action = 'retry'), 1::bigint, 'the retry is recorded');

SELECT is(pg_temp.run_next(1), 'extract', 'extract runs again');
SELECT is(pg_temp.run_next(1), 'transform', 'then transform');
SELECT is(pg_temp.run_next(1), 'load', 'then load');
SELECT results_eq($$SELECT job_name, complete_status FROM broker.broker_jobs WHERE job_name IN ('extract', 'transform', 'load') ORDER BY job_id$$,
                  $$VALUES ('extract'::text, 2::smallint), ('transform', 2::smallint), ('load', 2::smallint)$$,
                  'the DAG resumed and completed');

-- retry audit alone (no dependents): report stays cancelled
SELECT is(broker.broker_retry_job((SELECT job_id FROM ids WHERE job_name = 'audit'), NULL, false), 1, 'without dependents: only the job');
SELECT results_eq($$SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'report'$$, $$VALUES (4::smallint)$$,
                  'its dependent stays cancelled');
-- a retry with run_after
SELECT broker.broker_cancel_job((SELECT job_id FROM ids WHERE job_name = 'audit'));
SELECT is(broker.broker_retry_job((SELECT job_id FROM ids WHERE job_name = 'audit'), '2100-01-01 00:00Z', true), 2,
          'a cancelled job comes back too, with the dependents its cancel took (report)');
SELECT results_eq($$SELECT run_after FROM broker.broker_jobs WHERE job_name = 'audit'$$, $$VALUES ('2100-01-01 00:00Z'::timestamptz)$$,
                  'claimable from p_run_after');

-- states that cannot be retried
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM ids WHERE job_name = 'audit')), '55000',
                 format('broker_retry_job: job %s is pending; only failed or cancelled jobs can be retried', (SELECT job_id FROM ids WHERE job_name = 'audit')),
                 'a pending job: 55000');
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM ids WHERE job_name = 'load')), '55000',
                 format('broker_retry_job: job %s is completed; only failed or cancelled jobs can be retried', (SELECT job_id FROM ids WHERE job_name = 'load')),
                 'a completed job: 55000');
SELECT broker.broker_add_job('running', 'SELECT 1', 9);
SELECT broker.broker_get(9);
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'running')), '55000',
                 NULL, 'a running job: 55000');

-- its idempotency key taken meanwhile by a new unfinished job
SELECT broker.broker_add_job('keyed', 'SELECT 1/0', 10, p_idempotency_key => 'nightly import');
SELECT pg_temp.run_next(10);
SELECT broker.broker_add_job('keyed again', 'SELECT 1', 10, p_idempotency_key => 'nightly import');
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'keyed')), '23505',
                 format('broker_retry_job: another unfinished job has the idempotency key of job %s or of a job cancelled because of it',
                        (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'keyed')),
                 'its idempotency key taken by another unfinished job: 23505');

SELECT * FROM finish();
ROLLBACK;
