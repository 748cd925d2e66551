-- broker_cancel_job: pending jobs only, dependents follow.
BEGIN;
SELECT plan(8);

CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('a', 'SELECT 1');
SELECT broker.broker_add_job_simple('b', 'SELECT 1', 0, ARRAY['a']);
SELECT broker.broker_add_job_simple('c', 'SELECT 1', 0, ARRAY['b']);
SELECT is(broker.broker_cancel_job((SELECT job_id FROM a), 'not needed today'), 3, 'cancels the job and its 2 dependents');
SELECT results_eq($$SELECT complete_status, cancel_reason FROM broker.broker_jobs WHERE job_name = 'a'$$,
    $$VALUES (4::smallint, 'not needed today')$$, 'the given reason is kept');
SELECT ok((SELECT cancel_reason ~ 'dependency job \d+ \(a\) was cancelled' FROM broker.broker_jobs WHERE job_name = 'c'),
          'dependents name the cancelled job');
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM a)), '55000',
    format('broker_cancel_job: job %s is cancelled; only pending jobs can be cancelled', (SELECT job_id FROM a)),
    'cancelling twice: 55000');

CREATE TEMP TABLE r AS SELECT job_id FROM broker.broker_add_job('r', 'SELECT 1');
SELECT broker.broker_get(1);
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM r)), '55000', NULL,
    'a running job cannot be cancelled: 55000');
SELECT throws_ok('SELECT broker.broker_cancel_job(987654321)', 'P0002', NULL, 'unknown job: P0002');
SELECT throws_ok('SELECT broker.broker_cancel_job(NULL)', '22004', NULL, 'NULL id: 22004');
SELECT broker.broker_set_tenant('acme');
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM r)), 'P0002', NULL,
    'another tenant''s job does not exist for us');

SELECT * FROM finish();
ROLLBACK;
