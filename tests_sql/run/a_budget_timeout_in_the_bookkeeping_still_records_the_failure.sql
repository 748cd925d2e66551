-- broker_run_batch under a budget does its bookkeeping again when the budget's timeout fires in it (the
-- timeout fires once per statement). A failure being recorded when it fired must be recorded in the second
-- try too: the job fails (or is retried) as without the budget, never returned as "not run" and left claimed
-- until lease recovery counts a second, lost attempt. The timeout is made to fire inside the recording of the
-- failure: a trigger sleeps 3 s there, the budget is 1 s and the job itself fails at once.
BEGIN;
SELECT plan(4);

CREATE FUNCTION pg_temp.slow_failure() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_sleep(3);
    RETURN NEW;
END;
$f$;
CREATE TRIGGER slow_failure BEFORE UPDATE ON broker.broker_jobs
    FOR EACH ROW WHEN (NEW.last_error_sqlstate IS NOT DISTINCT FROM '22012' AND OLD.last_error_sqlstate IS NULL)
    EXECUTE FUNCTION pg_temp.slow_failure();

SELECT broker.broker_add_job('divides', 'SELECT 1/0', p_job_queue => 3);
CREATE TEMP TABLE claimed AS SELECT g.job_id, g.lease_token FROM broker.broker_get(3, NULL, 60, 10) AS g;

SET LOCAL statement_timeout = '1s';
CREATE TEMP TABLE out1 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed), ARRAY(SELECT lease_token FROM claimed), '1s');
SET LOCAL statement_timeout = 0;

SELECT is((SELECT ROW(complete_status, error_sqlstate)::text FROM out1), ROW(3, '22012')::text,
          'the job is reported failed with its own SQLSTATE, not "not run"');
SELECT is((SELECT ROW(complete_status, attempts, last_error_sqlstate, lease_token IS NULL)::text
             FROM broker.broker_jobs WHERE job_name = 'divides'),
          ROW(3, 1, '22012', true)::text, 'and it is failed in the table, its claim ended (max_attempts 1)');
SELECT is((SELECT pg_catalog.array_agg(outcome ORDER BY attempt_id) FROM broker.broker_job_attempts AS a
             JOIN broker.broker_jobs AS j USING (job_id) WHERE j.job_name = 'divides'),
          ARRAY['failed'], 'one attempt recorded, failed');
SELECT is((SELECT count(*) FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j USING (job_id)
            WHERE j.job_name = 'divides' AND a.error_sqlstate = '22012'), 1::bigint,
          'with the job''s SQLSTATE, once');

SELECT * FROM finish();
ROLLBACK;
