-- broker_recover_stale_jobs in one session (two-session cases: tests_py/test_recovery.py).
BEGIN;
SELECT plan(9);

CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('retryable', 'SELECT 1', p_max_attempts => 2);
CREATE TEMP TABLE b AS SELECT job_id FROM broker.broker_add_job('last try', 'SELECT 1');
SELECT broker.broker_add_job_simple('after last try', 'SELECT 1', 0, ARRAY['last try']);
CREATE TEMP TABLE c AS SELECT job_id FROM broker.broker_add_job('fresh lease', 'SELECT 1');
CREATE TEMP TABLE inst AS SELECT broker.broker_register_instance('claimer') AS id;
SELECT broker.broker_get(1, (SELECT id FROM inst), 60, 3);
-- two leases ran out; the third is still valid
UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second'
 WHERE job_id IN ((SELECT job_id FROM a), (SELECT job_id FROM b));

CREATE TEMP TABLE rec AS SELECT * FROM broker.broker_recover_stale_jobs();
SELECT is((SELECT count(*) FROM rec), 2::bigint, 'two expired leases recovered');
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM a)), 0::smallint,
          'attempts left: back to pending');
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM b)), 3::smallint,
          'attempts spent: failed');
SELECT ok((SELECT last_error_message ~ ('^lease expired at .* \(instance ' || (SELECT id FROM inst) || '\)$') FROM broker.broker_jobs
            WHERE job_id = (SELECT job_id FROM b)), 'the failure says the lease expired and which instance held it');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'after last try'), 4::smallint,
          'the dependents of a job failed by recovery are cancelled');
SELECT ok((SELECT run_after > now() AND lease_token IS NULL AND attempts = 1 FROM broker.broker_jobs
            WHERE job_id = (SELECT job_id FROM a)), 'the recovered job waits out the retry backoff; the lost attempt counts');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), 1::smallint,
          'a job with a valid lease is left alone');
SELECT is((SELECT count(*) FROM broker.broker_recover_stale_jobs()), 0::bigint, 'nothing more to recover');
SELECT throws_ok('SELECT broker.broker_recover_stale_jobs(0)', '22023', NULL, 'limit 0: 22023');

SELECT * FROM finish();
ROLLBACK;
