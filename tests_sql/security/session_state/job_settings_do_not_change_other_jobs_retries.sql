-- Settings a job SETs in the session do not change other jobs' retries.
BEGIN;
SELECT plan(1);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_mallory, broker_test_alice;

SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('poison', 'SET broker.retry_base_seconds = 2000000000; SET broker.lease_seconds = 1', 2);
RESET ROLE;
SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE flaky AS SELECT job_id FROM broker.broker_add_job('flaky', 'SELECT 1/0', 3, p_max_attempts => 5);
RESET ROLE;
SELECT broker.broker_run(job_id) FROM broker.broker_get(2);
SELECT broker.broker_run(job_id) FROM broker.broker_get(3);
SELECT ok((SELECT run_after < clock_timestamp() + interval '10 seconds' FROM broker.broker_jobs
            WHERE job_id = (SELECT job_id FROM flaky)), 'the retry backoff is still the configured one');

SELECT * FROM finish();
ROLLBACK;
