-- Idempotency keys broker_schedule:* are the tick's: nobody else can take one and suppress fires.
BEGIN;
SELECT plan(2);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;

SET LOCAL ROLE broker_test_mallory;
SELECT throws_ok($$SELECT broker.broker_add_job('squat', 'SELECT 1', p_idempotency_key => 'broker_schedule:1:1')$$,
    '22023', 'broker_add_job: p_idempotency_key must not start with broker_schedule: (reserved for schedules)',
    'broker_add_job refuses the schedules'' key prefix');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, idempotency_key)
                   VALUES ('squat', 'squat', 'SELECT 1', 'broker_schedule:1:1')$$,
    '42501', NULL, 'so does a direct INSERT');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
