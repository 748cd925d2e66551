-- The counter trigger's cost on a claim and a finish of 50 jobs (docs/benchmarks.md, "Queue stats with a
-- million finished jobs"): psql -X -q -d <a new database> -f bench/finish_counter_trigger.sql, then read the
-- Trigger lines of the four plans. Not a test: the figures depend on the machine and its load.
\set ON_ERROR_STOP 1
CREATE EXTENSION pgsql_broker CASCADE;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) SELECT 'drain', 'drain', 'SELECT 1', 1 FROM generate_series(1, 5000);
ANALYZE broker.broker_jobs;
-- warm up
UPDATE broker.broker_jobs SET complete_status = 1, attempts = 1, started_at = now(), lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour' WHERE job_id BETWEEN 1 AND 50;
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now(), lease_token = NULL, lease_expires_at = NULL WHERE job_id BETWEEN 1 AND 50;
EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) UPDATE broker.broker_jobs SET complete_status = 1, attempts = 1, started_at = now(), lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour' WHERE job_id BETWEEN 51 AND 100;
EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now(), lease_token = NULL, lease_expires_at = NULL WHERE job_id BETWEEN 51 AND 100;
EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) UPDATE broker.broker_jobs SET complete_status = 1, attempts = 1, started_at = now(), lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour' WHERE job_id BETWEEN 101 AND 150;
EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now(), lease_token = NULL, lease_expires_at = NULL WHERE job_id BETWEEN 101 AND 150;
