-- broker_add_job / broker_add_job_simple reject every bad input with a specific SQLSTATE.
BEGIN;
SELECT plan(24);

SELECT throws_ok($$SELECT broker.broker_add_job(NULL, 'SELECT 1')$$, '22004',
    'broker_add_job: p_job_name must not be NULL', 'NULL name: 22004');
SELECT throws_ok($$SELECT broker.broker_add_job('j', NULL)$$, '22004',
    'broker_add_job: p_execute_str must not be NULL', 'NULL SQL: 22004');
SELECT throws_ok($$SELECT broker.broker_add_job('   ', 'SELECT 1')$$, '22023', NULL, 'blank name: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job(repeat('x', 201), 'SELECT 1')$$, '22023', NULL, 'name over 200 chars: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', '  ')$$, '22023',
    'broker_add_job: p_execute_str is empty; give the SQL the job should run', 'empty SQL: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', 1, 0, 'python')$$, '22023',
    'broker_add_job: p_job_language must be sql or plpgsql, got ''python''', 'unknown language: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', 1, 0, NULL)$$, '22004', NULL, 'NULL language: 22004');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', 0)$$, '22023',
    'broker_add_job: p_job_queue must be >= 1, got 0', 'queue 0: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', -3)$$, '22023', NULL, 'negative queue: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', 1, NULL)$$, '22004', NULL, 'NULL priority: 22004');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_max_attempts => 0)$$, '22023',
    'broker_add_job: p_max_attempts must be >= 1, got 0', 'max_attempts 0: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_job_group => ' ')$$, '22023', NULL, 'blank group: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_idempotency_key => '')$$, '22023', NULL,
    'blank idempotency key: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_timeout => '0 s')$$, '22023', NULL,
    'non-positive timeout: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_depends_on_job_ids => ARRAY[NULL]::bigint[])$$,
    '22004', NULL, 'NULL dependency id: 22004');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_depends_on_groups => ARRAY['a', ''])$$,
    '22023', NULL, 'blank dependency group: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_depends_on_job_ids => ARRAY[987654321]::bigint[])$$,
    '23503', 'dependency job 987654321 does not exist', 'unknown dependency job: 23503');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_schedule_id => 987654321)$$,
    '23503', 'broker_add_job: schedule 987654321 does not exist', 'unknown schedule: 23503');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_depends_on_groups => ARRAY['j'])$$,
    '23514', NULL, 'depending on its own (default) group: 23514');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_job_group => 'g', p_depends_on_groups => ARRAY['x', 'g'])$$,
    '23514', NULL, 'depending on its own explicit group: 23514');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_run_as => 'no_such_role_xyz')$$,
    '42704', NULL, 'unknown run_as role: 42704');
SELECT throws_ok($$SELECT broker.broker_add_job_simple(NULL, 'SELECT 1')$$, '22004', NULL,
    'simple: NULL name: 22004');
SELECT throws_ok($$SELECT broker.broker_add_job_simple('j', 'SELECT 1', 0, ARRAY['j'])$$, '23514', NULL,
    'simple: own group: 23514');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 0::bigint, 'no rejected call left a job behind');

SELECT * FROM finish();
ROLLBACK;
