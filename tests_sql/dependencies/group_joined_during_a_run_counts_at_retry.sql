-- A job that joined a group while its dependent ran is counted when the dependent retries.
BEGIN;
SELECT plan(3);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_mallory, broker_test_alice;

SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE d AS SELECT job_id FROM broker.broker_add_job('D', 'SELECT 1/0', 4, p_depends_on_groups => ARRAY['g'],
                                                                p_max_attempts => 3);
RESET ROLE;
CREATE TEMP TABLE d_claim AS SELECT * FROM broker.broker_get(4);
SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('A', 'SELECT 1', 5, p_job_group => 'g');
RESET ROLE;
SELECT broker.broker_run((SELECT job_id FROM d_claim));
SELECT is((SELECT complete_status::text || '/' || pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM d)),
          '0/1', 'back to pending, D now waits on A');
SELECT lives_ok($$SELECT broker.broker_run(job_id) FROM broker.broker_get(5)$$, 'A completes without breaking the counter');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM d)), 0, 'and releases D');

SELECT * FROM finish();
ROLLBACK;
